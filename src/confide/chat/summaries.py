"""Rolling summaries: a long conversation's oldest messages become one searchable chunk.

After each saved message, :meth:`RollingSummaries.run` checks the conversation: when more
than ``trigger`` (30) messages are unsummarised, the oldest ``batch`` (20) are summarised in
one call returning ``{"summary": "...", "facts": [{"category", "content"}]}``. The summary
becomes an encrypted, embedded memory (type ``episodic``, category ``conversation_summary``,
the conversation's subject, the range in its sealed metadata); the facts become subject
facts (:mod:`confide.chat.facts`). Chunk, facts, the range record and the messages' mark
commit in one engine transaction (:meth:`MemoryEngine.commit_batch`): malformed JSON, an
LLM timeout, an embedder error or a database failure store nothing, and the range is tried
again on the next trigger. The range record is unique, so two triggers racing (or a retry
after a crash) commit it once: the loser's transaction finds it recorded and rolls back.

Without an LLM, :class:`OfflineSummariser` (extractive and deterministic) does the same job,
writing as a model's summary must: the user's statements retold in the third person, dated.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Protocol

from confide.chat.facts import ExtractedFact, SubjectFacts
from confide.chat.history import CHUNK_CATEGORY
from confide.chat.messages import MessageStore
from confide.chat.types import ChatMessage, FactCategory
from confide.conversation.validation import MAX_EXTRACTED_VALUE_CHARS
from confide.conversation.writing import Outcome, WritingTally, check_episodic, check_semantic
from confide.engine import MemoryEngine
from confide.errors import ProviderError
from confide.llm.answers import json_object
from confide.llm.base import LLM, Message
from confide.llm.offline import OfflineExtractor, split_clauses
from confide.llm.third_person import first_person, retell, strip_lead_in, third_person
from confide.storage.base import Transaction
from confide.storage.chat import SummaryRange
from confide.types import Memory, MemoryType, Source

__all__ = [
    "ACTOR",
    "SUMMARY_PROMPT",
    "LLMSummariser",
    "OfflineSummariser",
    "RollingSummaries",
    "Summariser",
    "Summary",
    "SummaryOutcome",
]

log = logging.getLogger(__name__)

ACTOR = "summaries"
"""The actor a summary's writes are audited under (its chunk, new facts and restated ones)."""

SUMMARY_PROMPT = (
    "You summarise part of a conversation between a user and an assistant so that nothing "
    "important is forgotten once it leaves the context window. Answer with one JSON object "
    'and nothing else: {"summary": "...", "facts": [{"category": "...", "content": "..."}]}. '
    "The summary is 2-4 sentences. Facts are only what the user stated or clearly implied, "
    "each one short sentence; category is one of personality, hobby, relationship, "
    "milestone, occupation, preference, habit, other. No facts: an empty list."
)


@dataclass(frozen=True, slots=True)
class Summary:
    """What a summariser made of a range: 2-4 sentences and the facts stated."""

    summary: str
    facts: list[ExtractedFact]


class Summariser(Protocol):
    """Summarises a range of messages."""

    async def summarise(self, messages: Sequence[ChatMessage]) -> Summary:
        """The range's summary; raises :class:`ProviderError` when it cannot make one."""
        ...


def parse_summary(text: str) -> Summary:
    """A model's answer as a :class:`Summary`; :class:`ProviderError` when malformed.

    An unknown fact category becomes ``other``; a fact without text is dropped.
    """
    try:
        data = json_object(text)
    except ValueError as exc:
        raise ProviderError(f"summary answer {exc}") from None
    summary = data.get("summary")
    facts = data.get("facts", [])
    if not isinstance(summary, str) or not summary.strip() or not isinstance(facts, list):
        raise ProviderError("summary answer lacks a summary text or a facts list")
    found = []
    for item in facts:
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            raise ProviderError("summary answer has a malformed fact")
        raw = str(item.get("category", "other")).strip().lower()
        category = FactCategory(raw) if raw in FactCategory._value2member_map_ else None
        if item["content"].strip():
            found.append(ExtractedFact(category or FactCategory.OTHER, item["content"].strip()))
    return Summary(" ".join(summary.split()), found)


def guarded_summary(summary: Summary, tally: WritingTally) -> Summary:
    """``summary`` through the writing rules: the summary text through the episodic guard,
    each fact through the semantic one (a rejected fact is dropped); verdicts counted.

    Raises:
        ProviderError: the summary text breaks the episodic rules (nothing is stored and
            the range is tried again, as for a malformed answer).
    """
    verdict = tally.add(check_episodic(summary.summary))
    if verdict.text is None:
        raise ProviderError(f"summary answer breaks the writing rules ({verdict.reason})")
    facts = []
    for fact in summary.facts:
        checked = tally.add(check_semantic(fact.content)).text
        if checked is not None:
            facts.append(ExtractedFact(fact.category, checked))
    return Summary(verdict.text, facts)


class LLMSummariser:
    """One chat-completion call per range, with :data:`SUMMARY_PROMPT`; the answer passes the
    writing rules (:func:`guarded_summary`), whose verdicts ``writing`` counts."""

    def __init__(self, llm: LLM, *, timeout: float = 30.0, temperature: float = 0.2) -> None:
        self.llm = llm
        self.timeout = timeout
        self.temperature = temperature
        self.writing = WritingTally()

    async def summarise(self, messages: Sequence[ChatMessage]) -> Summary:
        """Ask the model once and parse its JSON; :class:`ProviderError` on any failure,
        an answer breaking the writing rules included."""
        transcript = "\n".join(f"{m.role}: {m.content}" for m in messages)
        prompt: list[Message] = [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": transcript},
        ]
        answer = await self.llm.complete(prompt, temperature=self.temperature, timeout=self.timeout)
        return guarded_summary(parse_summary(answer), self.writing)


_RELATIONS = frozenset(
    {
        "daughter",
        "son",
        "wife",
        "husband",
        "partner",
        "mother",
        "father",
        "mum",
        "mom",
        "dad",
        "brother",
        "sister",
        "friend",
        "grand",
        "niece",
        "nephew",
        "aunt",
        "uncle",
        "cousin",
        "pet",
        "dog",
        "cat",
        "neighbour",
        "neighbor",
        "child",
    }
)


def _category(key: str, kind: MemoryType) -> FactCategory:
    if any(word in key for word in ("occupation", "job", "work", "employer", "career")):
        return FactCategory.OCCUPATION
    if any(word in key for word in _RELATIONS):
        return FactCategory.RELATIONSHIP
    if any(word in key for word in ("hobby", "plays", "sport", "instrument")):
        return FactCategory.HOBBY
    if kind == MemoryType.PREFERENCE:
        return FactCategory.PREFERENCE
    if kind == MemoryType.PROCEDURAL:
        return FactCategory.HABIT
    if kind == MemoryType.HISTORY:
        return FactCategory.MILESTONE
    return FactCategory.OTHER


# Words that place a statement in time relative to when it was said: a fact using one is
# dated, so that "yesterday" still means something when the fact is read later.
_RELATIVE_TIME = re.compile(
    r"(?i)\b(?:today|tonight|yesterday|tomorrow|lately|recently|currently|right now|ago|"
    r"(?:this|last|next) (?:morning|afternoon|evening|night|week|weekend|month|year|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day))\b"
)
# A capitalised word after a lower-case one is a name ("met Caroline", "in Denver").
_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+")


def _day(message: ChatMessage) -> str:
    """The day ``message`` was written, as ``8 May 2023`` (UTC)."""
    when = message.timestamp
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return f"{when.day} {when:%B %Y}"


def _lowered(text: str, names: frozenset[str]) -> str:
    """``text`` to follow ``On <day>,`` or ``said that``: its first word in lower case
    unless it is one of ``names``."""
    first = re.split(r"[\s',]", text, maxsplit=1)[0]
    return text if first in names else text[:1].lower() + text[1:]


@dataclass(frozen=True, slots=True)
class _Told:
    """A statement of the user's, retold: where it was said and what it says."""

    weight: float
    position: int
    said: str
    told: str
    day: str


class OfflineSummariser:
    """Extractive and deterministic: the user's most informative statements, retold in the
    third person and dated, and the facts in them.

    A statement is a clause of a user's message that states something (not a question, a
    hypothetical, someone else's words: :func:`~confide.llm.offline.split_clauses`), is not
    a request or an order, addresses no one (``you``), and, retold
    (:func:`~confide.llm.third_person.third_person`: ``I`` becomes ``the user``), passes the
    semantic writing rules on its own. The summary is 2-4 of them (facts first, then the
    longest), in conversation order; the first opens with the day its message was written
    and is told in the past tense (``On 8 May 2023, the user said that they...`` when the
    statement is not in the past tense already), a later one opens with its own day when it
    differs. So it passes the episodic writing rules, as a model's summary must.

    Facts: a statement the offline rules recognise gets their category; any other statement
    the user makes about themselves (first person) is kept as an ``other`` fact, so what the
    rules have no pattern for is not lost. Each is the retold statement, dated when it uses
    a word such as ``yesterday`` or ``next week``.
    """

    def __init__(self) -> None:
        self.rules = OfflineExtractor()

    async def summarise(self, messages: Sequence[ChatMessage]) -> Summary:
        """Pick 2-4 statements (facts first, then the longest), in conversation order."""
        scored: list[_Told] = []
        facts: list[ExtractedFact] = []
        seen: set[str] = set()
        names = frozenset(n for m in messages for n in _NAME.findall(m.content))
        for message in messages:
            if message.role != "user":
                continue
            for clause in split_clauses(message.content):
                said = strip_lead_in(clause)
                if len(said) < 12 or said.lower() in seen:
                    continue
                seen.add(said.lower())
                told = retell(said)
                if told is None or check_semantic(told).outcome is not Outcome.ACCEPTED:
                    continue
                day = _day(message)
                found = self.rules.extract_text(said)
                about_user = not found and first_person(said)
                fact = self._dated(told, day, names)
                for candidate in found:
                    facts.append(ExtractedFact(_category(candidate.key, candidate.type), fact))
                if about_user:
                    facts.append(ExtractedFact(FactCategory.OTHER, fact))
                weight = 2.0 * bool(found) + 1.0 * about_user + min(len(said), 160) / 160
                scored.append(_Told(weight, len(scored), said, told, day))
        unique = list({(f.category, f.content): f for f in facts}.values())
        if not scored:
            return Summary(self._exchange(messages), unique)
        best = sorted(scored, key=lambda s: (-s.weight, s.position))[:4]
        chosen = sorted(best, key=lambda s: s.position)
        sentences = [self._first(chosen[0], names)]
        for before, statement in itertools.pairwise(chosen):
            if statement.day == before.day:
                sentences.append(statement.told)
            else:
                sentences.append(f"On {statement.day}, {_lowered(statement.told, names)}")
        return Summary(" ".join(sentences), unique)

    @staticmethod
    def _first(statement: _Told, names: frozenset[str]) -> str:
        """The summary's first sentence: dated, in the past tense."""
        direct = f"On {statement.day}, {_lowered(statement.told, names)}"
        if check_episodic(direct).outcome is Outcome.ACCEPTED:
            return direct
        reported = third_person(statement.said, named=True).rstrip("!.,;:- ")
        return f"On {statement.day}, the user said that {_lowered(reported, names)}."

    @staticmethod
    def _dated(told: str, day: str, names: frozenset[str]) -> str:
        """``told``, opening with ``day`` when it places itself in time relative to it."""
        if not _RELATIVE_TIME.search(told):
            return told
        dated = f"On {day}, {_lowered(told, names)}"
        return dated if len(dated) <= MAX_EXTRACTED_VALUE_CHARS else told

    @staticmethod
    def _exchange(messages: Sequence[ChatMessage]) -> str:
        """A summary for a range with nothing to retell: when, and how many messages."""
        days = list(dict.fromkeys(_day(m) for m in messages))
        if not days:
            return "The user and the assistant exchanged no messages."
        when = f"On {days[0]}" if len(days) == 1 else f"Between {days[0]} and {days[-1]}"
        count = len(messages)
        noun = "message" if count == 1 else "messages"
        return f"{when}, the user and the assistant exchanged {count} {noun}."


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """A committed summary: its chunk, the range ``[start, end)``, the facts written and
    the conversation's owner."""

    chunk_id: str
    range_start: int
    range_end: int
    facts_written: int
    user_id: str


class _AlreadySummarised(Exception):
    """Another trigger committed this range first (the transaction rolls back)."""


class RollingSummaries:
    """Decides when a conversation needs a summary and commits it in one transaction."""

    def __init__(
        self,
        engine: MemoryEngine,
        messages: MessageStore,
        facts: SubjectFacts,
        summariser: Summariser,
        *,
        trigger: int = 30,
        batch: int = 20,
    ) -> None:
        self.engine = engine
        self.messages = messages
        self.facts = facts
        self.summariser = summariser
        self.trigger = trigger
        self.batch = batch

    def due(self, account_id: str, conversation_id: str) -> list[ChatMessage] | None:
        """The oldest ``batch`` messages when more than ``trigger`` are unsummarised."""
        rows = self.messages.tables.unsummarised(account_id, conversation_id)
        if len(rows) <= self.trigger:
            return None
        batch = rows[: self.batch]
        opened = self.messages.open(batch)
        if len(opened) != len(batch):
            log.warning("summary skipped: %d messages did not open", len(batch) - len(opened))
            return None
        return opened

    async def run(self, *, account_id: str, conversation_id: str) -> SummaryOutcome | None:
        """Summarise the oldest range if due; ``None`` when not due or already summarised.

        Raises what failed (:class:`ProviderError` from the model or the embedder,
        :class:`StorageError`...) with nothing stored.
        """
        due = await asyncio.to_thread(self.due, account_id, conversation_id)
        if due is None:
            return None
        summary = await self.summariser.summarise(due)
        return await asyncio.to_thread(self.commit, account_id, conversation_id, due, summary)

    def commit(
        self,
        account_id: str,
        conversation_id: str,
        messages: Sequence[ChatMessage],
        summary: Summary,
    ) -> SummaryOutcome | None:
        """Write chunk, facts, range record and the messages' mark in one transaction."""
        start, end = messages[0].index, messages[-1].index + 1
        owner = self.messages.tables.owner(account_id, conversation_id)
        if owner is None:
            return None
        subject = next((m.subject_id for m in reversed(messages) if m.subject_id), None)
        plan = self.facts.plan(
            account_id=account_id,
            user_id=owner,
            subject_id=subject,
            facts=summary.facts,
            conversation_id=conversation_id,
        )
        chunk: dict[str, Any] = {
            "account_id": account_id,
            "user_id": owner,
            "subject_id": subject,
            "key": f"conversation_summary.{start}-{end}",
            "value": summary.summary,
            "type": MemoryType.EPISODIC,
            "category": CHUNK_CATEGORY,
            "source": Source.CONVERSATION,
            "metadata": {
                "conversation_id": conversation_id,
                "range_start": start,
                "range_end": end,
            },
        }
        now = time.time()

        def record(tx: Transaction, written: Sequence[Memory]) -> None:
            tables = self.messages.tables
            summary = SummaryRange(
                account_id, owner, conversation_id, start, end, written[0].id, now
            )
            if not tables.record_summary(tx, summary):
                raise _AlreadySummarised
            tables.mark_summarised(tx, summary)

        try:
            written = self.engine.commit_batch(
                new=[chunk, *plan.new], revisions=plan.revisions, within=record, actor=ACTOR
            )
        except _AlreadySummarised:
            log.info("range %d-%d already summarised", start, end)
            return None
        log.info("summarised messages %d-%d: %d facts written", start, end, len(written) - 1)
        chunk_memory = written[0]
        self.engine.emit_op(
            "episodic",
            "create",
            account_id=account_id,
            user_id=owner,
            memory_id=chunk_memory.id,
            category=chunk_memory.category,
        )
        for revised in written[1 + len(plan.new) :]:
            # A fact the summary restated folded into the memory it already had.
            self.engine.emit_op(
                "episodic",
                "merge",
                account_id=account_id,
                user_id=owner,
                memory_id=revised.id,
                category=revised.category,
            )
        return SummaryOutcome(written[0].id, start, end, len(written) - 1, owner)
