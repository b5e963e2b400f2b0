"""The multi-fact pass: a long user turn may state several facts; find them off the hot path.

A user turn longer than ``CONFIDE_MULTIFACT_MIN_CHARS`` gets one model call
(:data:`MULTIFACT_PROMPT`, temperature 0) that lists 1-5 candidate facts; a pass given an
``extractor`` (the offline one, when no model is configured) reads the turn with it instead,
making no call. The candidates go through
the very pipeline end-of-session extraction uses (:class:`ExtractionPipeline`): the semantic
writing guard, a usable key from the fixed vocabulary, words the user said, a key not stored
already (a changed sensitive key becomes a proposal) and the write-time de-duplication
policy with extraction's bands (``CONFIDE_DEDUP_TEXT_THRESHOLD``,
``CONFIDE_DEDUP_COSINE_THRESHOLD``). At most three memories are written per turn, and at most
``CONFIDE_MULTIFACT_DAILY_CAP`` per user per UTC day (a turn past the cap makes no call).

Where the turn comes from. The turn's text is never written anywhere to hand it to the job:

* :meth:`MultiFactPass.run_turn` takes the text from the caller's memory (a live voice
  session's buffer, a request being served): the job runs where the text already is;
* :meth:`MultiFactPass.run_message` takes only ids (account, user, conversation, index) and
  opens the chat message, which the chat layer already keeps sealed under the user's key;
  so a queued job's payload holds no text, and an erased user's message no longer opens.

A failed call or an answer without a JSON array raises :class:`ProviderError` before any
write: the data is as it was and the worker may retry. Reports hold counts only.

Which write paths run the pass, and with which extractor, is decided in one place:
:mod:`confide.workers.multifact_trigger`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from confide.chat.messages import MessageStore
from confide.config import Settings
from confide.conversation.buffer import Session, Turn
from confide.conversation.consent import ConsentPolicy
from confide.conversation.dedup import DedupPolicy
from confide.conversation.extraction import (
    DEFAULT_SENSITIVE_KEYS,
    ExtractionPipeline,
    Extractor,
    ProposalSink,
    parse_candidates,
)
from confide.conversation.summarizer import EngineMemorySink
from confide.conversation.writing import Outcome, WritingTally
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, ProviderError, ValidationError
from confide.llm.base import LLM, Message
from confide.llm.candidates import Candidate, TurnLike
from confide.llm.usage import UsageLedger, metered
from confide.types import Memory, MemoryFilter, MemoryState, NewMemory, Source, utcnow
from confide.workers.model_job import ModelJob

__all__ = [
    "MULTIFACT_PROMPT",
    "MultiFactExtractor",
    "MultiFactPass",
    "MultiFactReport",
]

log = logging.getLogger(__name__)

MAX_CANDIDATES = 5
MAX_WRITES_PER_TURN = 3
MAX_TURN_CHARS = 8_000
MAX_TOKENS = 400
ORIGIN = "multifact"
OPERATION = "multifact"

MULTIFACT_PROMPT = """\
You read one message a user wrote to an assistant and list the separate facts about the \
user it states, so each can be remembered on its own.

Return ONLY a JSON array of 1 to 5 objects:
{"type": ..., "key": ..., "value": ..., "confidence": ...}
- type: one of fact, preference, follow_up, context, history, wellbeing
- key: from a fixed vocabulary, never made of the user's words: e.g. preferred_name,
  daughter_name, pet_dog_name, city, favorite_color, health_condition; for things a person
  has many of use the family alone: likes, dislikes, prefers, routine, appointment, pain,
  visit, relationship; anything else: note
- value: one complete sentence in the third person ("The user ..."), at most 280 characters
- confidence: 0 to 1

Only what the user states about themselves; no guesses. These keys are stored already: \
{stored}. If the message states nothing new, return [].
"""
"""The fixed system prompt of the multi-fact call (``{stored}``: the user's stored keys)."""


@dataclass(frozen=True, kw_only=True)
class MultiFactReport:
    """What one turn's pass did, in counts (never texts).

    ``skipped`` says why the turn was not read (``short``, ``no_llm``, ``budget``,
    ``daily_cap``; ``failed``: the model failed, from a caller that does not retry);
    ``extractor`` names what read it (``multifact``: the model's call; ``offline``: the rules,
    no call); ``capped`` counts facts left unwritten by the per-turn or daily cap;
    ``first_pass`` the candidates the writing rules accepted unchanged.
    """

    account_id: str
    user_id: str
    skipped: str | None = None
    extractor: str | None = None
    candidates: int = 0
    stored: int = 0
    duplicates: int = 0
    capped: int = 0
    proposed: int = 0
    skipped_existing: int = 0
    dropped_ungrounded: int = 0
    rejected: int = 0
    first_pass: int = 0


class MultiFactExtractor:
    """An :class:`~confide.conversation.extraction.Extractor` over one user turn: one call at
    temperature 0, at most five candidates."""

    name = "multifact"

    def __init__(self, llm: LLM, *, timeout: float = 30.0) -> None:
        self._llm = llm
        self._timeout = timeout

    async def extract(
        self, turns: Sequence[TurnLike], *, skip_keys: Collection[str] = ()
    ) -> list[Candidate]:
        """The first five candidates of the model's JSON array.

        Raises:
            ProviderError: the call failed or the answer holds no JSON array.
        """
        stored = ", ".join(sorted({k.lower() for k in skip_keys})) or "(none)"
        text = "\n".join(t.summary for t in turns if t.speaker == "user")
        messages: list[Message] = [
            {"role": "system", "content": MULTIFACT_PROMPT.replace("{stored}", stored)},
            {"role": "user", "content": text},
        ]
        answer = await self._llm.complete(
            messages, temperature=0.0, timeout=self._timeout, max_tokens=MAX_TOKENS
        )
        return parse_candidates(answer)[:MAX_CANDIDATES]


class _CappedSink:
    """The engine sink, writing at most ``limit`` memories and marking them as this pass's."""

    def __init__(self, inner: EngineMemorySink, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.capped = 0

    async def existing_keys(self, *, account_id: str, user_id: str) -> set[str]:
        return await self.inner.existing_keys(account_id=account_id, user_id=user_id)

    async def current_value(self, *, account_id: str, user_id: str, key: str) -> str | None:
        return await self.inner.current_value(account_id=account_id, user_id=user_id, key=key)

    async def create(self, memory: NewMemory) -> None:
        if self.inner.created >= self.limit:
            self.capped += 1
            return
        metadata = {**memory.metadata, "origin": ORIGIN}
        await self.inner.create(memory.model_copy(update={"metadata": metadata}))


class MultiFactPass(ModelJob):
    """Runs the multi-fact pass for one turn at a time (see the module docstring).

    Takes the parts of :class:`~confide.workers.model_job.ModelJob` (the engine, the model,
    ``settings``: ``multifact_min_chars``, ``multifact_daily_cap``, the de-duplication bands
    and the sensitive keys; keyword-only the de-duplication policy, the usage ledger and the
    call's timeout) and:

    Args:
        proposals: where a held candidate goes (a sensitive key, or a benign one too few
            consent signals corroborate); ``None``: dropped.
        extractor: reads the turn instead of the model (the offline extractor, for a
            process with no model configured); it makes no call, so the budget does not
            apply and its output, the user's own words, skips the writing rules.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        llm: LLM | None,
        settings: Settings,
        *,
        dedup: DedupPolicy | None = None,
        proposals: ProposalSink | None = None,
        ledger: UsageLedger | None = None,
        timeout: float = 30.0,
        extractor: Extractor | None = None,
    ) -> None:
        super().__init__(engine, llm, settings, ledger=ledger, dedup=dedup, timeout=timeout)
        self.proposals = proposals
        self.extractor = extractor
        self.sensitive_keys = settings.sensitive_keys or tuple(DEFAULT_SENSITIVE_KEYS)

    async def run_turn(
        self,
        *,
        account_id: str,
        user_id: str,
        turn_text: str,
        now: datetime | None = None,
        session_id: str | None = None,
        collect: list[Memory] | None = None,
    ) -> MultiFactReport:
        """Find and store the facts one user turn states (``turn_text`` is never stored);
        the memories written are appended to ``collect`` (in process memory only).

        Raises:
            ProviderError: the model failed or answered without a JSON array; nothing was
                written and the job may be retried.
            StorageError: reading the user's keys failed.
        """
        report = MultiFactReport(account_id=account_id, user_id=user_id)
        text = " ".join(turn_text.split())
        if len(text) <= self.settings.multifact_min_chars:
            return self._logged(replace(report, skipped="short"))
        extractor: Extractor
        writing: WritingTally | None
        if self.extractor is not None:
            extractor, writing = self.extractor, None
            report = replace(report, extractor=str(getattr(extractor, "name", "custom")))
        elif self.llm is None:
            return self._logged(replace(report, skipped="no_llm"))
        elif await self.over_budget(account_id):
            return self._logged(replace(report, skipped="budget"))
        else:
            extractor = MultiFactExtractor(self.llm, timeout=self.timeout)
            writing = WritingTally()
            report = replace(report, extractor=MultiFactExtractor.name)
        when = now or utcnow()
        written_today = await asyncio.to_thread(self.written_today, account_id, user_id, when)
        room = min(MAX_WRITES_PER_TURN, self.settings.multifact_daily_cap - written_today)
        if room <= 0:
            return self._logged(replace(report, skipped="daily_cap"))
        session = Session(
            session_id=session_id or f"turn-{uuid.uuid4().hex}",
            account_id=account_id,
            user_id=user_id,
            start_time=when,
            turns=(
                Turn(
                    timestamp=when,
                    speaker="user",
                    summary=text[:MAX_TURN_CHARS],
                    intent="statement",
                ),
            ),
        )
        sink = _CappedSink(EngineMemorySink(self.engine, dedup=self.dedup, node="worker"), room)
        pipeline = ExtractionPipeline(
            extractor,
            sink,
            proposals=self.proposals,
            consent=ConsentPolicy.of(
                self.sensitive_keys, min_confidence=self.settings.consent_min_confidence
            ),
            writing=writing,
        )
        with metered(account_id, OPERATION, f"user:{user_id}"):
            outcome = await pipeline.run(session)
        tally = writing or WritingTally()
        self.writing.merge(tally)
        if outcome.error is not None:
            raise ProviderError("multi-fact pass: the model failed or answered without a list")
        if collect is not None:
            collect.extend(sink.inner.stored)
        return self._logged(
            replace(
                report,
                candidates=outcome.extracted,
                stored=sink.inner.created,
                duplicates=sink.inner.duplicates,
                capped=sink.capped,
                proposed=outcome.proposed,
                skipped_existing=outcome.skipped_existing,
                dropped_ungrounded=outcome.dropped_ungrounded,
                rejected=tally.counts[Outcome.REJECTED],
                first_pass=tally.counts[Outcome.ACCEPTED],
            )
        )

    async def run_message(
        self,
        *,
        account_id: str,
        user_id: str,
        conversation_id: str,
        index: int,
        now: datetime | None = None,
        collect: list[Memory] | None = None,
    ) -> MultiFactReport:
        """The pass over a saved chat message, opened from its sealed row by ids alone.

        Raises:
            NotFoundError: no such message of this user (or it no longer opens).
            ValidationError: the message is the assistant's.
            ProviderError: as :meth:`run_turn`.
        """
        text = await asyncio.to_thread(
            self._message_text, account_id, user_id, conversation_id, index
        )
        return await self.run_turn(
            account_id=account_id,
            user_id=user_id,
            turn_text=text,
            now=now,
            session_id=f"conversation:{conversation_id}"[:256],
            collect=collect,
        )

    def _message_text(self, account_id: str, user_id: str, conversation_id: str, index: int) -> str:
        store = MessageStore(self.engine)
        rows = store.tables.messages(account_id, conversation_id, after=index - 1, limit=1)
        row = rows[0] if rows and rows[0].index == index else None
        if row is None or row.user_id != user_id:
            raise NotFoundError("message not found")
        if row.role != "user":
            raise ValidationError("the multi-fact pass reads the user's messages only")
        content = store.content(row)
        if content is None:
            raise NotFoundError("message not found")
        return content

    def written_today(self, account_id: str, user_id: str, now: datetime) -> int:
        """Memories this pass wrote for the user since ``now``'s UTC midnight (forgotten ones
        count: forgetting does not give the day's writes back)."""
        midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        flt = MemoryFilter(
            account_id=account_id,
            user_id=user_id,
            source=Source.EXTRACTION,
            created_after=midnight - timedelta(microseconds=1),
            states=(MemoryState.ACTIVE, MemoryState.SOFT_DELETED),
        )
        return sum(
            1
            for m in self.engine.list_memories(flt, limit=10_000)
            if m.metadata.get("origin") == ORIGIN
        )

    @staticmethod
    def _logged(report: MultiFactReport) -> MultiFactReport:
        log.info(
            "multifact: skipped=%s extractor=%s candidates=%d stored=%d duplicates=%d "
            "capped=%d rejected=%d",
            report.skipped or "no",
            report.extractor or "none",
            report.candidates,
            report.stored,
            report.duplicates,
            report.capped,
            report.rejected,
        )
        return report
