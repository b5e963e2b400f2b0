"""End-of-session summarisation: run the extraction pipeline over a finished session.

:class:`EngineMemorySink` is the pipeline's :class:`MemorySink` over the engine: it reports
the user's active keys, reads current values and only ever *creates*, through the
de-duplication policy. :class:`SessionSummarizer` decides whether a session is worth
extracting from and runs the pipeline with the configured extractor (the LLM when one is
configured, else the offline rules). Only counts are logged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from confide.config import Settings
from confide.conversation.buffer import Session
from confide.conversation.consent import ConsentPolicy
from confide.conversation.dedup import DedupPolicy, Duplicate
from confide.conversation.extraction import (
    DEFAULT_SENSITIVE_KEYS,
    ExtractionPipeline,
    ExtractionReport,
    Extractor,
    LLMExtractor,
    ProposalSink,
    ProposedChange,
    writing_of,
)
from confide.conversation.procedural import ProceduralGate
from confide.engine import MemoryEngine
from confide.errors import ConflictError
from confide.llm.base import LLM
from confide.llm.candidates import Candidate, TurnLike
from confide.llm.offline import OfflineExtractor
from confide.llm.registry import llm_from_settings
from confide.llm.usage import metered
from confide.storage.base import Transaction
from confide.types import Memory, MemoryFilter, NewMemory

__all__ = [
    "EngineMemorySink",
    "SessionOutcome",
    "SessionSummarizer",
    "extractor_from_settings",
    "should_summarize",
    "skip_reason",
]

log = logging.getLogger(__name__)

_MAX_KEYS = 5000
ERASED = "the user was erased after the session began"


class EngineMemorySink:
    """A :class:`MemorySink` that creates memories in the engine, skipping duplicates.

    ``stored`` holds the memories it created, in order, ``outcomes`` those and the active
    memories a candidate duplicated (with the :class:`Duplicate` that decided it), in the
    order they came (both in process memory only). Each
    write is an operational event under ``node``: ``create``, or ``merge`` with status
    ``duplicate``, the memory it repeats and the similarity that decided it as ``sim``.

    With ``since`` (wall-clock seconds: when the data written from began, such as a call's
    start) a write for a user erased at or after it is refused (:class:`ConflictError`),
    in the write's own transaction: what the user said before the erasure is not stored
    after it under a fresh key.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        dedup: DedupPolicy | None = None,
        node: str = "episodic",
        since: float | None = None,
    ) -> None:
        self._engine = engine
        self._dedup = dedup or DedupPolicy()
        self._node = node
        self._since = since
        self.duplicates = 0
        self.created = 0
        self.stored: list[Memory] = []
        self.outcomes: list[tuple[Memory, Duplicate | None]] = []

    async def existing_keys(self, *, account_id: str, user_id: str) -> set[str]:
        """Keys of the user's active memories, lower-cased."""
        memories = await asyncio.to_thread(
            self._engine.list_memories,
            MemoryFilter(account_id=account_id, user_id=user_id),
            limit=_MAX_KEYS,
        )
        return {m.key.lower() for m in memories}

    async def current_value(self, *, account_id: str, user_id: str, key: str) -> str | None:
        """The value of the user's active memory with ``key``, if any."""
        memory = await asyncio.to_thread(
            lambda: self._engine.get_by_key(account_id=account_id, user_id=user_id, key=key)
        )
        return None if memory is None else memory.value

    async def create(self, memory: NewMemory) -> None:
        """Store ``memory`` unless it nearly duplicates an active one (then count it)."""
        await asyncio.to_thread(self._create, memory)

    def _create(self, memory: NewMemory) -> None:
        owner = (memory.account_id, memory.user_id)
        if self._since is not None and self._engine.erased_since(*owner, self._since):
            # Asked before anything is read or sealed (no key of the user's next generation
            # is made for a refused write), and again in the write's transaction, where the
            # answer holds until commit.
            raise ConflictError(ERASED)
        twin = self._dedup.find_duplicate(
            self._engine,
            account_id=memory.account_id,
            user_id=memory.user_id,
            key=memory.key,
            value=memory.value,
            memory_type=memory.type,
        )
        if twin is not None:
            self.duplicates += 1
            self.outcomes.append((twin.memory, twin))
            self._op("merge", twin.memory, status="duplicate", sim=twin.similarity)
            return
        if self._since is None:
            stored = self._engine.store(memory, actor="extraction")
        else:
            since = self._since

            def unerased(tx: Transaction, _: Sequence[Memory]) -> None:
                if self._engine.erased_since(memory.account_id, memory.user_id, since, tx=tx):
                    raise ConflictError(ERASED)

            [stored] = self._engine.commit_batch(new=[memory], within=unerased, actor="extraction")
        self.stored.append(stored)
        self.outcomes.append((stored, None))
        self.created += 1
        self._op("create", stored)

    def _op(self, op: str, memory: Memory, *, status: str = "ok", sim: float | None = None) -> None:
        self._engine.emit_memory_op(self._node, op, memory, status=status, sim=sim)


class _UnlessErased:
    """Files proposals unless the user was erased since ``since`` (the proposal would be a
    row of the user written after the erasure)."""

    def __init__(self, inner: ProposalSink, engine: MemoryEngine, since: float) -> None:
        self._inner = inner
        self._engine = engine
        self._since = since

    async def propose(self, change: ProposedChange) -> None:
        erased = await asyncio.to_thread(
            self._engine.erased_since, change.account_id, change.user_id, self._since
        )
        if erased:
            raise ConflictError(ERASED)
        await self._inner.propose(change)


class _SensitiveAware:
    """Lets the extractor report sensitive keys even when stored, so changes can be proposed.

    The pipeline asks extractors to skip every stored key; a sensitive key that was skipped
    could never become a proposal, so those keys are taken off the skip list here.
    """

    def __init__(self, inner: Extractor, sensitive: Collection[str]) -> None:
        self._inner = inner
        self._sensitive = {k.lower() for k in sensitive}
        self.name = getattr(inner, "name", type(inner).__name__)

    async def extract(
        self, turns: Sequence[TurnLike], *, skip_keys: Collection[str] = ()
    ) -> list[Candidate]:
        skip = [k for k in skip_keys if k.lower() not in self._sensitive]
        return await self._inner.extract(turns, skip_keys=skip)


@dataclass(frozen=True, kw_only=True)
class SessionOutcome:
    """What summarising one session did (counts only)."""

    report: ExtractionReport
    created: int
    duplicates: int
    seconds: float
    erased: bool = False
    """The user was erased after the session began: nothing of it was kept."""


def should_summarize(
    *,
    connected_at: float | None,
    ended_at: float,
    is_reminder: bool,
    min_seconds: float,
) -> bool:
    """Extract only from connected, non-reminder calls that lasted ``min_seconds``."""
    return (
        skip_reason(
            connected_at=connected_at,
            ended_at=ended_at,
            is_reminder=is_reminder,
            min_seconds=min_seconds,
        )
        is None
    )


def skip_reason(
    *,
    connected_at: float | None,
    ended_at: float,
    is_reminder: bool,
    min_seconds: float,
) -> str | None:
    """Why a session is not summarised (times and settings only), or ``None`` if it is."""
    if connected_at is None:
        return "session never connected (POST /sessions/{id}/connected)"
    if is_reminder:
        return "reminder calls are not summarised"
    lasted = ended_at - connected_at
    if lasted < min_seconds:
        shown = math.floor(max(lasted, 0.0) * 10) / 10  # rounded down: never shown as enough
        return f"session lasted {shown:g} s < CONFIDE_MIN_SESSION_SECONDS={min_seconds:g}"
    return None


def extractor_from_settings(settings: Settings) -> Extractor:
    """The end-of-session extractor ``settings`` choose: the configured LLM's, or offline."""
    llm: LLM | None = llm_from_settings(settings)
    return OfflineExtractor() if llm is None else LLMExtractor(llm)


class SessionSummarizer:
    """Runs extraction for finished sessions.

    Args:
        engine: the memory engine.
        proposals: where proposed changes to sensitive keys go.
        extractor: overrides the choice made from ``settings``.
        settings: picks the LLM (``llm_from_settings``); none configured means offline.
        dedup: the de-duplication policy for created memories.
        sensitive_keys: keys extraction never changes.
        clock: a monotonic clock for the duration figure.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        proposals: ProposalSink | None,
        extractor: Extractor | None = None,
        settings: Settings | None = None,
        dedup: DedupPolicy | None = None,
        sensitive_keys: Collection[str] = DEFAULT_SENSITIVE_KEYS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._engine = engine
        self._proposals = proposals
        conf = settings or engine.settings
        self._consent = ConsentPolicy.of(sensitive_keys, min_confidence=conf.consent_min_confidence)
        self._procedural = ProceduralGate(min_confidence=conf.procedural_min_confidence)
        self._dedup = dedup or DedupPolicy()
        self._sensitive = sensitive_keys
        self._extractor = extractor or extractor_from_settings(settings or engine.settings)
        self._clock = clock or time.perf_counter

    @property
    def extractor_name(self) -> str:
        """``llm``, ``offline`` or the custom extractor's class name."""
        return str(getattr(self._extractor, "name", type(self._extractor).__name__))

    async def summarize(self, session: Session) -> SessionOutcome:
        """Extract memories from ``session`` and store those that pass every check."""
        start = self._clock()
        since = session.start_time.timestamp()
        owner = (session.account_id, session.user_id)
        if await asyncio.to_thread(self._engine.erased_since, *owner, since):
            return self._erased(session, start)
        sink = EngineMemorySink(self._engine, dedup=self._dedup, since=since)
        proposals = (
            None if self._proposals is None else _UnlessErased(self._proposals, self._engine, since)
        )
        pipeline = ExtractionPipeline(
            _SensitiveAware(self._extractor, self._sensitive),
            sink,
            proposals=proposals,
            writing=writing_of(self._extractor),
            consent=self._consent,
            procedural=self._procedural,
        )
        with metered(session.account_id, "extraction", f"user:{session.user_id}"):
            report = await pipeline.run(session)
        seconds = self._clock() - start
        if await asyncio.to_thread(self._engine.erased_since, *owner, since):
            return self._erased(session, start)  # its writes were refused from then on
        # The call's extraction as one event: its writes are counted one by one above.
        self._engine.emit_op(
            "episodic",
            "extract",
            account_id=session.account_id,
            user_id=session.user_id,
            status="error" if report.error else "ok" if sink.created else "empty",
        )
        log.info(
            "summarization: created=%d duplicates=%d proposed=%d",
            sink.created,
            sink.duplicates,
            report.proposed,
        )
        return SessionOutcome(
            report=report, created=sink.created, duplicates=sink.duplicates, seconds=seconds
        )

    def _erased(self, session: Session, start: float) -> SessionOutcome:
        """The outcome of a session whose user was erased after it began (no event: it
        would name the user after the erasure)."""
        log.info("summarization dropped: the user was erased after the session began")
        report = ExtractionReport(turns_processed=len(session.turns), error="erased")
        return SessionOutcome(
            report=report, created=0, duplicates=0, seconds=self._clock() - start, erased=True
        )
