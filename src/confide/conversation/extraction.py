"""End-of-session extraction: find memories the agent did not store during the conversation.

The pipeline (:class:`ExtractionPipeline`) asks an :class:`Extractor` for candidates, then
keeps only those that pass every check: a known type and a usable key, a short value, words
the *user* said (an assistant reciting a recalled memory does not count), and a key that is
neither stored already nor stored during the session. Extraction only creates; it never
updates. A sensitive key becomes a :class:`ProposedChange` instead, whether it would be
set for the first time or changed; a benign memory is created only when two consent signals
corroborate it, and held as a proposal otherwise (:mod:`confide.conversation.consent`). A
candidate typed ``procedural`` stays one only as numbered steps, asked for or detected with
high confidence (:mod:`confide.conversation.procedural`). Failures of the model are logged
(counts only) and yield an empty result; nothing here ever logs a value or the transcript.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confide.conversation.buffer import Session
from confide.conversation.consent import DEFAULT_SENSITIVE_KEYS, ConsentPolicy, Signal
from confide.conversation.procedural import ProceduralGate, is_explicit_request
from confide.conversation.validation import is_grounded, normalize_key, validate_value
from confide.conversation.writing import WritingTally, check_semantic
from confide.errors import ConfideError, ProviderError
from confide.llm.base import LLM, Message
from confide.llm.candidates import EXTRACTABLE_TYPES, Candidate, TurnLike
from confide.llm.key_vocabulary import to_vocabulary
from confide.types import MemoryType, NewMemory, Source

__all__ = [
    "DEFAULT_SENSITIVE_KEYS",
    "EXTRACTION_PROMPT",
    "ExtractionPipeline",
    "ExtractionReport",
    "Extractor",
    "LLMExtractor",
    "MemorySink",
    "ProposalSink",
    "ProposedChange",
    "parse_candidates",
    "render_transcript",
    "writing_of",
]

log = logging.getLogger(__name__)


EXTRACTION_PROMPT = """\
You read a finished conversation between a user and an assistant and list what is worth
remembering about the user for future conversations.

Return ONLY a JSON array. Each element is an object:
{"type": ..., "key": ..., "value": ..., "confidence": ...}
- type: one of fact, preference, follow_up, context, history, wellbeing, insight, procedural
- key: from a fixed vocabulary, never made of the user's words: e.g. preferred_name,
  daughter_name, pet_dog_name, city, favorite_color, mood, health_condition; for things a
  person has many of use the family alone: likes, dislikes, prefers, routine, appointment,
  pain, visit, relationship (the specifics go in the value); anything else: note
- value: one or two short sentences, at most 280 characters
- confidence: 0 to 1

Rules:
- Only what the USER said about themselves. Ignore what the ASSISTANT said, including
  anything it recalled from memory.
- Skip everything already stored; these keys are stored already: {stored}
- No small talk, no guesses. If there is nothing new, return [].
"""


class Extractor(Protocol):
    """Anything that proposes memories from conversation turns (an LLM or the offline rules)."""

    async def extract(
        self, turns: Sequence[TurnLike], *, skip_keys: Collection[str] = ()
    ) -> list[Candidate]:
        """Candidate memories from ``turns``, leaving out ``skip_keys`` where it can.

        Raises:
            ProviderError: the underlying model failed or answered with no usable JSON.
        """
        ...


class MemorySink(Protocol):
    """Where extracted memories go (the engine, in production)."""

    async def existing_keys(self, *, account_id: str, user_id: str) -> set[str]:
        """Keys of the user's active memories (any case)."""
        ...

    async def current_value(self, *, account_id: str, user_id: str, key: str) -> str | None:
        """The value of the user's active memory with ``key`` (case-insensitive), or None."""
        ...

    async def create(self, memory: NewMemory) -> None:
        """Store a new memory."""
        ...


@dataclass(frozen=True, kw_only=True)
class ProposedChange:
    """A change a person must confirm before it applies (``current_value`` is ``None`` when
    the key would be set for the first time)."""

    account_id: str
    user_id: str
    key: str
    current_value: str | None = field(repr=False)
    proposed_value: str = field(repr=False)
    type: MemoryType
    confidence: float
    session_id: str
    source: Source = Source.EXTRACTION


class ProposalSink(Protocol):
    """Where proposed changes to sensitive keys go (the service's ``ProposalStore``)."""

    async def propose(self, change: ProposedChange) -> None:
        """Record ``change`` for review."""
        ...


@dataclass(frozen=True, kw_only=True)
class ExtractionReport:
    """Counts of one extraction run; never values."""

    turns_processed: int = 0
    extracted: int = 0
    stored: int = 0
    proposed: int = 0
    skipped_existing: int = 0
    dropped_ungrounded: int = 0
    rejected_invalid: int = 0
    uncorroborated: int = 0
    """Benign candidates held back (fewer than two consent signals, no proposal store)."""
    failed_writes: int = 0
    error: str | None = None


def render_transcript(turns: Sequence[TurnLike]) -> str:
    """Turns as ``[USER] ...`` / ``[ASSISTANT] ...`` lines."""
    return "\n".join(f"[{t.speaker.upper()}] {t.summary}" for t in turns)


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def _find_array(text: str) -> list[Any] | None:
    fenced = _FENCE.findall(text)
    for chunk in [*fenced, text]:
        decoder = json.JSONDecoder()
        for start in (i for i, ch in enumerate(chunk) if ch in "[{"):
            try:
                data, _ = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                data = data.get("memories")
            if isinstance(data, list):
                return data
    return None


def parse_candidates(text: str) -> list[Candidate]:
    """Candidates from a model's answer: a JSON array, possibly in code fences or amid prose.

    Elements that are not objects with a known ``type`` and string ``key`` and ``value``
    are skipped; confidence defaults to 0.7 and is clamped to 0..1.

    Raises:
        ProviderError: the answer holds no JSON array at all.
    """
    items = _find_array(text)
    if items is None:
        raise ProviderError("extraction answer holds no JSON array")
    out: list[Candidate] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        key, value, kind = item.get("key"), item.get("value"), item.get("type")
        if not (isinstance(key, str) and isinstance(value, str) and isinstance(kind, str)):
            continue
        try:
            memory_type = MemoryType(kind.strip().lower())
        except ValueError:
            continue
        raw = item.get("confidence", 0.7)
        conf = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else 0.7
        out.append(
            Candidate(type=memory_type, key=key, value=value, confidence=min(max(conf, 0.0), 1.0))
        )
    return out


class LLMExtractor:
    """An :class:`Extractor` backed by a chat model: one call, no retry.

    ``writing`` counts the writing-rule verdicts on its candidates: pass it to
    :class:`ExtractionPipeline` (the wiring does) so they pass the semantic guard.
    """

    name = "llm"

    def __init__(self, llm: LLM, *, timeout: float = 30.0, temperature: float = 0.3) -> None:
        self._llm = llm
        self._timeout = timeout
        self._temperature = temperature
        self.writing = WritingTally()

    async def extract(
        self, turns: Sequence[TurnLike], *, skip_keys: Collection[str] = ()
    ) -> list[Candidate]:
        """Ask the model once (30 s timeout, temperature 0.3) and parse its JSON array.

        Raises:
            ProviderError: the call failed or the answer holds no JSON array.
        """
        stored = ", ".join(sorted({k.lower() for k in skip_keys})) or "(none)"
        messages: list[Message] = [
            {"role": "system", "content": EXTRACTION_PROMPT.replace("{stored}", stored)},
            {"role": "user", "content": render_transcript(turns)},
        ]
        answer = await self._llm.complete(
            messages, temperature=self._temperature, timeout=self._timeout
        )
        return parse_candidates(answer)


def writing_of(extractor: Extractor) -> WritingTally | None:
    """The tally whose writing rules ``extractor``'s output must pass: a model's, else none."""
    return extractor.writing if isinstance(extractor, LLMExtractor) else None


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()).strip(" .") == " ".join(b.lower().split()).strip(" .")


class ExtractionPipeline:
    """Runs an extractor over a finished session and writes what survives the checks.

    Args:
        extractor: an :class:`LLMExtractor`, the offline extractor, or any :class:`Extractor`.
        sink: where new memories are created.
        proposals: where held writes go (sensitive keys, uncorroborated benign ones);
            without it they are dropped.
        sensitive_keys: keys never set by extraction without the user (case-insensitive).
        consent: the consent policy (overrides ``sensitive_keys``).
        procedural: what a candidate typed ``procedural`` becomes.
        writing: given, every candidate passes the semantic writing guard
            (:func:`confide.conversation.writing.check_semantic`, keyed) and its verdict is
            counted here; a rejected one counts as invalid. The wiring passes a model
            extractor's own tally (the rules are for what a model writes); without it
            (the offline rules) values are only trimmed by :func:`validate_value`.
            Procedural steps are exempt (numbered steps are not one or two sentences).
    """

    def __init__(
        self,
        extractor: Extractor,
        sink: MemorySink,
        *,
        proposals: ProposalSink | None = None,
        sensitive_keys: Collection[str] = DEFAULT_SENSITIVE_KEYS,
        consent: ConsentPolicy | None = None,
        procedural: ProceduralGate | None = None,
        writing: WritingTally | None = None,
    ) -> None:
        self._extractor = extractor
        self._sink = sink
        self._proposals = proposals
        self._consent = consent or ConsentPolicy.of(sensitive_keys)
        self._procedural = procedural or ProceduralGate()
        self._writing = writing

    async def run(self, session: Session) -> ExtractionReport:
        """Extract from ``session`` and store new memories; never raises for model failures.

        Raises:
            ConfideError: only if reading the existing keys from the sink fails.
        """
        turns = session.turns
        user_text = "\n".join(t.summary for t in turns if t.speaker == "user")
        if not user_text.strip():
            return self._logged(ExtractionReport(turns_processed=len(turns)))
        owner = {"account_id": session.account_id, "user_id": session.user_id}
        existing = {k.lower() for k in await self._sink.existing_keys(**owner)}
        in_session = set(session.stored_keys)
        try:
            candidates = await self._extractor.extract(turns, skip_keys=existing | in_session)
        except ProviderError:
            report = ExtractionReport(turns_processed=len(turns), error="provider")
            return self._logged(report)

        counts = {
            "stored": 0,
            "proposed": 0,
            "existing": 0,
            "ungrounded": 0,
            "invalid": 0,
            "uncorroborated": 0,
        }
        failed = 0
        seen: set[str] = set()
        user_turns = [t.summary for t in turns if t.speaker == "user"]
        explicit = is_explicit_request(user_text)
        for candidate in candidates:
            key = normalize_key(candidate.key)
            kind = candidate.type
            value: str | None
            if kind is MemoryType.PROCEDURAL:
                kind, raw = self._procedural.admit(
                    value=candidate.value, confidence=candidate.confidence, explicit=explicit
                )
            else:
                raw = candidate.value
            if kind is MemoryType.PROCEDURAL:
                value = raw
            else:
                written: str | None = raw
                if self._writing is not None and key is not None:
                    written = self._writing.add(check_semantic(raw, keyed=True)).text
                value = None if written is None else validate_value(written)
            if key is None or value is None or kind not in EXTRACTABLE_TYPES:
                counts["invalid"] += 1
                continue
            if not is_grounded(value, user_text):
                counts["ungrounded"] += 1
                continue
            # Keys come from the fixed vocabulary whatever the extractor said: a model's
            # free-text key goes to its family (numbered past the keys already taken) and its
            # words into the value.
            keyed = to_vocabulary(
                Candidate(type=kind, key=key, value=value), existing | in_session | seen
            )
            if kind is not MemoryType.PROCEDURAL:  # steps keep their numbered form
                value = validate_value(keyed.value) or value
            key = keyed.key
            if key in seen or key in in_session:
                counts["existing"] += 1
                continue
            seen.add(key)
            try:
                if key in existing:
                    outcome = await self._maybe_propose(session, key, value, kind, candidate)
                    counts[outcome] += 1
                    continue
                # Grounded in the user's words (checked above): heard, whatever the turns.
                signals = self._consent.signals(
                    value=value, confidence=candidate.confidence, live=False, user_turns=user_turns
                ) | {Signal.HEARD}
                if self._consent.is_sensitive(key) or not self._consent.corroborated(signals):
                    outcome = await self._hold(session, key, None, value, kind, candidate)
                    counts[outcome] += 1
                    continue
                await self._sink.create(
                    NewMemory(
                        **owner,
                        key=key,
                        value=value,
                        type=kind,
                        confidence=candidate.confidence,
                        source=Source.EXTRACTION,
                        metadata={"session_id": session.session_id},
                    )
                )
                counts["stored"] += 1
            except (ConfideError, ValueError):
                failed += 1
        return self._logged(
            ExtractionReport(
                turns_processed=len(turns),
                extracted=len(candidates),
                stored=counts["stored"],
                proposed=counts["proposed"],
                skipped_existing=counts["existing"],
                dropped_ungrounded=counts["ungrounded"],
                rejected_invalid=counts["invalid"],
                uncorroborated=counts["uncorroborated"],
                failed_writes=failed,
            )
        )

    async def _maybe_propose(
        self, session: Session, key: str, value: str, kind: MemoryType, candidate: Candidate
    ) -> str:
        """A stored key: a new value of a sensitive one is proposed; extraction never changes
        a benign one (the agent's live tools do)."""
        if not self._consent.is_sensitive(key) or self._proposals is None:
            return "existing"
        current = await self._sink.current_value(
            account_id=session.account_id, user_id=session.user_id, key=key
        )
        if current is None or _same(current, value):
            return "existing"
        return await self._hold(session, key, current, value, kind, candidate)

    async def _hold(
        self,
        session: Session,
        key: str,
        current: str | None,
        value: str,
        kind: MemoryType,
        candidate: Candidate,
    ) -> str:
        """File the write as a proposal (``"proposed"``), or drop it without a proposal
        store (``"uncorroborated"``)."""
        if self._proposals is None:
            return "uncorroborated"
        await self._proposals.propose(
            ProposedChange(
                account_id=session.account_id,
                user_id=session.user_id,
                key=key,
                current_value=current,
                proposed_value=value,
                type=kind,
                confidence=candidate.confidence,
                session_id=session.session_id,
            )
        )
        return "proposed"

    @staticmethod
    def _logged(report: ExtractionReport) -> ExtractionReport:
        log.info(
            "extraction: turns=%d extracted=%d stored=%d proposed=%d skipped=%d "
            "ungrounded=%d invalid=%d uncorroborated=%d failed_writes=%d error=%s",
            report.turns_processed,
            report.extracted,
            report.stored,
            report.proposed,
            report.skipped_existing,
            report.dropped_ungrounded,
            report.rejected_invalid,
            report.uncorroborated,
            report.failed_writes,
            report.error or "none",
        )
        return report
