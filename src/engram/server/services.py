"""Everything one service process holds: engine, tables, buffer, dispatcher, tasks, metrics.

Built by :func:`engram.server.create_app` and kept on ``app.state.services``; nothing here
exists at import time.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from engram.async_engine import AsyncMemoryEngine
from engram.chat import ChatMemory
from engram.config import Settings
from engram.conversation.buffer import Session, SessionBuffer
from engram.conversation.dedup import DedupPolicy
from engram.conversation.dispatcher import EngineDispatcher, QueryHandler
from engram.conversation.extraction import DEFAULT_SENSITIVE_KEYS, Extractor
from engram.conversation.proposals import ProposalStore
from engram.conversation.realtime import Dispatcher, RealtimeAdapter
from engram.conversation.summarizer import SessionSummarizer, skip_reason
from engram.embedders.base import Embedder
from engram.engine import MemoryEngine
from engram.errors import NotFoundError
from engram.server.auth import ApiKeys
from engram.server.loader import EngineMemoryLoader
from engram.server.metrics import Metrics
from engram.server.tasks import TaskRegistry
from engram.storage.base import SERVICE_KEYS_BLINDED
from engram.storage.service import CallSessionRow
from engram.types import Memory

if TYPE_CHECKING:
    from engram.client import Engram

__all__ = ["ServiceOptions", "Services"]

log = logging.getLogger(__name__)

ALREADY_ENDED = "session had already ended"
NO_TURNS = "no turns were recorded for this session in this process"


class ServiceOptions(BaseModel):
    """Service knobs; :meth:`of` takes them from :class:`Settings` (``ENGRAM_*`` variables,
    e.g. ``ENGRAM_DEDUP_TEXT_THRESHOLD``), the one place settings are read."""

    model_config = ConfigDict(frozen=True)

    dedup_text_threshold: float = Field(default=0.92, ge=0.0, le=1.0)
    dedup_cosine_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    proposal_ttl_days: float = Field(default=7.0, gt=0)
    sensitive_keys: tuple[str, ...] = tuple(sorted(DEFAULT_SENSITIVE_KEYS))
    agent_instructions: str = "You are a warm, patient voice companion."

    @classmethod
    def of(cls, settings: Settings) -> ServiceOptions:
        """The knobs as ``settings`` sets them."""
        return cls(
            dedup_text_threshold=settings.dedup_text_threshold,
            dedup_cosine_threshold=settings.dedup_cosine_threshold,
            proposal_ttl_days=settings.proposal_ttl_days,
            sensitive_keys=(
                tuple(sorted(DEFAULT_SENSITIVE_KEYS))
                if settings.sensitive_keys is None
                else settings.sensitive_keys
            ),
            agent_instructions=settings.agent_instructions,
        )


class Services:
    """The service's collaborators, wired once per app.

    Args:
        engine: the memory engine (closed by :meth:`close` only when ``owns_engine``).
        settings: Engram settings (``min_session_seconds``, the LLM choice).
        options: service knobs.
        extractor: overrides the extractor chosen from settings.
        embedder: optional, for the embedding test of the de-duplication policy.
        query: the ``memory_query`` handler, if any.
        clock: wall-clock seconds (injectable for tests).
        chat: the chat memory (messages, history, summaries, subject facts); by default one
            over ``engine`` without an embedder.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        settings: Settings,
        *,
        options: ServiceOptions | None = None,
        extractor: Extractor | None = None,
        embedder: object | None = None,
        query: QueryHandler | None = None,
        clock: Callable[[], float] = time.time,
        owns_engine: bool = False,
        chat: ChatMemory | None = None,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.aengine = AsyncMemoryEngine(engine)
        self.settings = settings
        self.options = options or ServiceOptions.of(settings)
        self.clock = clock
        self._owns_engine = owns_engine
        self.tables = engine.service_tables()
        self.keys = ApiKeys(self.tables)
        self.buffer = SessionBuffer()
        self.metrics = Metrics(integrity_failures=lambda: engine.integrity_failures)
        self.tasks = TaskRegistry()
        self.dedup = DedupPolicy(
            text_threshold=self.options.dedup_text_threshold,
            cosine_threshold=self.options.dedup_cosine_threshold,
            embedder=embedder,  # type: ignore[arg-type]
        )
        self.proposals = ProposalStore(
            engine, self.tables, ttl=timedelta(days=self.options.proposal_ttl_days)
        )
        if engine.meta_value(SERVICE_KEYS_BLINDED) != "done":
            # An older store: proposals and session events still hold keys in clear.
            self.proposals.upgrade_keys()
        self.dispatcher = EngineDispatcher(
            engine,
            dedup=self.dedup,
            proposals=self.proposals,
            sensitive_keys=self.options.sensitive_keys,
            tool_log=self.tables,
            on_write=self.metrics.memory_written,
            query=query,
        )
        self.summarizer = SessionSummarizer(
            engine,
            proposals=self.proposals,
            extractor=extractor,
            settings=settings,
            dedup=self.dedup,
            sensitive_keys=self.options.sensitive_keys,
        )
        self.loader = EngineMemoryLoader(engine, on_failure=self.metrics.refresh_failed)
        self.sdk: Engram | None = None
        """The SDK over this engine when the app opened it (``/v1/add``, ``/v1/search``)."""
        self.chat = chat or ChatMemory(
            engine, settings=settings, embedder=embedder if isinstance(embedder, Embedder) else None
        )

    def schedule_summary(self, *, account_id: str, conversation_id: str) -> None:
        """Check in the background whether the conversation needs a rolling summary."""
        self.tasks.spawn(
            self._summary_check(account_id, conversation_id), name="conversation-summary"
        )

    async def _summary_check(self, account_id: str, conversation_id: str) -> None:
        try:
            await self.chat.summarise_if_due(account_id=account_id, conversation_id=conversation_id)
        except Exception as exc:  # the range stays unsummarised and is retried next time
            log.error("conversation summary failed: %s", type(exc).__name__)

    def close(self) -> None:
        """Close the engine if this service opened it."""
        if self._owns_engine:
            self.engine.close()

    # ---- sessions ----------------------------------------------------------------------------
    def start_session(self, *, account_id: str, user_id: str, is_reminder: bool) -> str:
        """Create a call session (persisted) and open its ephemeral buffer."""
        session_id = str(uuid.uuid4())
        now = self.clock()
        self.tables.insert_session(
            CallSessionRow(
                id=session_id,
                account_id=account_id,
                user_id=user_id,
                is_reminder=is_reminder,
                created_at=now,
                connected_at=None,
                ended_at=None,
                tool_calls=0,
                memories_extracted=0,
                summarization=None,
            )
        )
        self.tables.add_event(session_id, "created", now)
        self.buffer.start(session_id, account_id=account_id, user_id=user_id)
        return session_id

    def session_of(self, session_id: str, *, account_id: str) -> CallSessionRow:
        """The persisted session, within an account.

        Raises:
            NotFoundError: ``Call session not found``.
        """
        row = self.tables.get_session(session_id)
        if row is None or row.account_id != account_id:
            raise NotFoundError("Call session not found")
        return row

    def buffer_session(self, row: CallSessionRow) -> Session:
        """The live buffer of a session, reopened (empty) if this process lost it."""
        live = self.buffer.get(row.id)
        if live is not None:
            return live
        return self.buffer.start(row.id, account_id=row.account_id, user_id=row.user_id)

    async def end_session(self, row: CallSessionRow) -> tuple[str, str | None]:
        """End a session: clear its buffer and schedule extraction when it qualifies.

        Returns ``("scheduled", None)`` or ``("skipped", reason)``; never waits for the
        extraction. Ending a session that has already ended changes nothing stored.
        """
        now = self.clock()
        snapshot = self.buffer.clear(row.id)
        if row.ended_at is not None:
            return "skipped", ALREADY_ENDED
        reason = skip_reason(
            connected_at=row.connected_at,
            ended_at=now,
            is_reminder=row.is_reminder,
            min_seconds=self.settings.min_session_seconds,
        )
        if reason is None and snapshot is None:
            reason = NO_TURNS
        outcome = "skipped" if reason is not None else "scheduled"
        await asyncio.to_thread(self.tables.mark_ended, row.id, now, outcome)
        if snapshot is not None and reason is None:
            self.tasks.spawn(self._summarize(snapshot), name=f"summarize-{row.id}")
        return outcome, reason

    def skip_reason(self, row: CallSessionRow) -> str | None:
        """Why an ended session was not summarised, from its stored times and flags."""
        if row.ended_at is None or row.summarization != "skipped":
            return None
        reason = skip_reason(
            connected_at=row.connected_at,
            ended_at=row.ended_at,
            is_reminder=row.is_reminder,
            min_seconds=self.settings.min_session_seconds,
        )
        return reason or NO_TURNS

    async def _summarize(self, session: Session) -> None:
        try:
            outcome = await self.summarizer.summarize(session)
        except Exception as exc:  # a failed extraction must not take the service down
            self.metrics.summarization_failed()
            log.error("summarization failed: %s", type(exc).__name__)
            await asyncio.to_thread(self.tables.set_extracted, session.session_id, 0, "failed")
            return
        self.metrics.session_summarized(
            seconds=outcome.seconds, created=outcome.created, duplicates=outcome.duplicates
        )
        status = "failed" if outcome.report.error else "done"
        await asyncio.to_thread(
            self.tables.set_extracted, session.session_id, outcome.created, status
        )

    def adapter(
        self,
        session_id: str,
        *,
        instructions: str | None = None,
        dispatcher: Dispatcher | None = None,
    ) -> RealtimeAdapter:
        """A Realtime adapter for an open session, wired to this service.

        ``dispatcher`` replaces the service's own for this adapter (the realtime socket
        runs tool calls under its API key).
        """
        return RealtimeAdapter(
            buffer=self.buffer,
            session_id=session_id,
            dispatcher=dispatcher or self.dispatcher,
            memories=self.loader,
            instructions=instructions or self.options.agent_instructions,
        )

    def active_memories(self, *, account_id: str, user_id: str) -> Sequence[Memory]:
        """A user's active memories, newest first (for listings)."""
        return self.loader.load_sync(account_id=account_id, user_id=user_id)
