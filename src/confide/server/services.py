"""Everything one service process holds: engine, tables, buffer, dispatcher, tasks, metrics.

Built by :func:`confide.server.create_app` and kept on ``app.state.services``; nothing here
exists at import time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from confide.apps import AppMessage
from confide.async_engine import AsyncMemoryEngine
from confide.config import Settings
from confide.conversation.buffer import Session
from confide.conversation.extraction import DEFAULT_SENSITIVE_KEYS
from confide.conversation.realtime import Dispatcher, RealtimeAdapter
from confide.conversation.summarizer import skip_reason
from confide.errors import NotFoundError, SessionHeldError
from confide.gate import AsyncGate
from confide.server.auth import ApiKeys
from confide.server.loader import EngineMemoryLoader
from confide.server.metrics import Metrics
from confide.server.tasks import TaskRegistry
from confide.storage.scrubs import SqlScrubTables
from confide.storage.service import CallSessionRow
from confide.storage.service.sessions import SqlServiceTables
from confide.types import Memory
from confide.wiring import Components
from confide.workers.conversation_jobs import (
    APP_RESUME,
    CHAT_SUMMARY,
    enqueue_app_resume,
    enqueue_chat_summary,
)
from confide.workers.memory_jobs import enqueue_insights
from confide.workers.multifact_trigger import MULTIFACT, MultiFactTrigger
from confide.workers.worker import RunReport
from confide.workers.worker import Worker as JobWorker

if TYPE_CHECKING:
    from confide.client import Confide

__all__ = ["ServiceOptions", "Services", "Worker"]

log = logging.getLogger(__name__)

ALREADY_ENDED = "session had already ended"
NO_TURNS = "no turns were recorded for this session in this process"


class ServiceOptions(BaseModel):
    """Service knobs; :meth:`of` takes them from :class:`Settings` (``CONFIDE_*`` variables,
    e.g. ``CONFIDE_DEDUP_TEXT_THRESHOLD``), the one place settings are read."""

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


class Worker(BaseModel):
    """This service process, as call sessions record the one holding their turns.

    ``id`` is made anew at every start (a restarted process is another worker: the turns
    it held died with it); ``host`` and ``pid`` are for people reading a session row.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    host: str
    pid: int

    @classmethod
    def this_process(cls) -> Worker:
        """A new identity for the running process."""
        return cls(id=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid())


class Services:
    """The service's collaborators over the process's components (:func:`confide.wiring.build`).

    Args:
        components: the engine, retrieval, chat and app memories, dispatcher and gate;
            :meth:`close` closes them.
        clock: wall-clock seconds (injectable for tests).
        worker: this process as call sessions record it; by default a new identity (two
            apps in one process are two workers, as two processes would be).
    """

    def __init__(
        self,
        components: Components,
        *,
        clock: Callable[[], float] = time.time,
        worker: Worker | None = None,
    ) -> None:
        self.components = components
        engine = components.engine
        self.engine = engine
        self.settings = components.settings
        self.options = ServiceOptions.of(components.settings)
        self.worker = worker or Worker.this_process()
        self.embedder = components.embedder
        self.aengine = AsyncMemoryEngine(engine)
        self.clock = clock
        self.tables = SqlServiceTables(engine.storage.database)
        self.keys = ApiKeys(self.tables)
        self.buffer = components.buffer
        self._ending = asyncio.Lock()
        self.metrics = Metrics(
            integrity_failures=lambda: engine.integrity_failures,
            sessions_evicted=lambda: self.buffer.evicted,
            scrubs_pending=lambda: len(
                SqlScrubTables(engine.storage.database).pending(limit=10_000)
            ),
            app_labels=components.settings.metrics_app_labels,
        )
        self.tasks = TaskRegistry()
        self.usage = components.usage
        self.usage.on_record = self.metrics.llm_call
        self.metered_llm = components.llm
        self.dedup = components.dedup
        self.proposals = components.proposals
        self.dispatcher = components.dispatcher
        components.on_write.listeners.append(self.metrics.memory_written)
        self.gate = components.gate
        self.agate = AsyncGate(components.gate)
        """The gate for the routes: every operation awaitable, its storage work off the loop."""
        self.summarizer = components.summarizer
        self.loader = EngineMemoryLoader(engine, on_failure=self.metrics.refresh_failed)
        self.sdk: Confide | None = None
        """The SDK over these components (``/v1/add``, ``/v1/search``), set by
        :func:`~confide.server.create_app`."""
        self.chat = components.chat
        self.apps = components.apps
        self.apps.on_compaction = self.metrics.app_compacted
        self.apps.monitor = self.metrics
        self.apps.on_defer = self._deferred
        self.jobs: JobWorker | None = None
        """The job worker over this service's chat and app memories (set by
        :func:`~confide.server.create_app`; a thread runs it as ``CONFIDE_SERVE_WORKER`` says)."""

    def schedule_app_end(
        self,
        *,
        account_id: str,
        app_id: str,
        conversation_id: str,
        messages: Sequence[AppMessage],
        reason: str | None,
        user_id: str | None = None,
    ) -> None:
        """Write the app memory of an ended conversation in the background (recording the
        user it was with, when known)."""
        self.tasks.spawn(
            self._app_end(account_id, app_id, conversation_id, messages, reason, user_id),
            name="app-memory",
        )

    def _deferred(self, account_id: str) -> None:
        """Queue the job that does the account's deferred app memory work once the budget
        allows (a worker holds it until then)."""
        enqueue_app_resume(self.engine, account_id=account_id)

    def run_jobs(self, kinds: Sequence[str] = (CHAT_SUMMARY, APP_RESUME, MULTIFACT)) -> RunReport:
        """Run the queued due jobs of ``kinds`` (by default those this service's requests
        queue; no schedule is enqueued) in the calling thread until none is left; an empty
        report without a job worker."""
        if self.jobs is None:
            return RunReport()
        return self.jobs.run_once(kinds=kinds, schedules=False)

    async def _app_end(
        self,
        account_id: str,
        app_id: str,
        conversation_id: str,
        messages: Sequence[AppMessage],
        reason: str | None,
        user_id: str | None,
    ) -> None:
        try:
            outcome = await self.apps.end_conversation(
                account_id=account_id,
                app_id=app_id,
                conversation_id=conversation_id,
                messages=messages,
                reason=reason,
                user_id=user_id,
            )
            if not outcome.deferred:
                # Work an earlier end left for the budget may run now.
                await self.apps.resume_deferred(account_id)
        except Exception as exc:  # a failed memory must not take the service down
            self.metrics.app_memory_failed()
            log.error("app memory failed: %s", type(exc).__name__)

    def enqueue_summary(self, *, account_id: str, conversation_id: str) -> None:
        """Queue the conversation's rolling-summary check for a worker (one job while one is
        queued, however many messages arrive meanwhile)."""
        enqueue_chat_summary(self.engine, account_id=account_id, conversation_id=conversation_id)

    def close(self) -> None:
        """Close the components (the engine only if they opened it)."""
        self.components.close()

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
        self.tables.add_event(session_id, "created", now, account_id=account_id)
        self.buffer.start(session_id, account_id=account_id, user_id=user_id)
        return session_id

    def session_of(self, session_id: str, *, account_id: str) -> CallSessionRow:
        """The persisted session, within an account.

        Raises:
            NotFoundError: ``Call session not found``.
        """
        row = self.tables.get_session(session_id, account_id=account_id)
        if row is None or row.account_id != account_id:
            raise NotFoundError("Call session not found")
        return row

    def buffer_session(self, row: CallSessionRow) -> Session:
        """The live buffer of a session, reopened (empty) if this process lost it."""
        live = self.buffer.get(row.id)
        if live is not None:
            return live
        return self.buffer.start(row.id, account_id=row.account_id, user_id=row.user_id)

    async def hold_session(self, row: CallSessionRow) -> CallSessionRow:
        """Make this process the one holding the call's turns, or refuse.

        The first process to buffer a turn (or open the Realtime socket, or end the call)
        claims the session; turns live only in that process's memory, so any other process
        reached by the call refuses rather than summarise part of it.

        Raises:
            SessionHeldError: another process holds the session (409, naming it).
            NotFoundError: the session no longer exists.
        """
        if row.worker_id is None:
            claimed = await asyncio.to_thread(
                self.tables.claim_session,
                row.id,
                account_id=row.account_id,
                worker_id=self.worker.id,
                host=self.worker.host,
                pid=self.worker.pid,
            )
            if claimed is None:
                raise NotFoundError("Call session not found")
            row = claimed
        if row.worker_id != self.worker.id:
            raise SessionHeldError(
                {"id": row.worker_id, "host": row.worker_host, "pid": row.worker_pid}
            )
        return row

    async def connect_session(self, row: CallSessionRow) -> None:
        """Record that the call connected (the first time only)."""
        now = self.clock()
        await asyncio.to_thread(self.tables.mark_connected, row.id, now, account_id=row.account_id)
        await asyncio.to_thread(
            self.tables.add_event, row.id, "connected", now, account_id=row.account_id
        )

    async def end_session(self, row: CallSessionRow) -> tuple[str, str | None]:
        """End a session: clear its buffer and schedule extraction when it qualifies.

        Returns ``("scheduled", None)`` or ``("skipped", reason)``; never waits for the
        extraction. Ending a session that has already ended changes nothing stored; when
        two enders race (the Realtime socket closing and ``POST .../end``), one ends it and
        extraction is scheduled at most once.

        Raises:
            SessionHeldError: the call is live and another process holds its turns.
        """
        async with self._ending:
            return await self._end_session(row)

    async def _end_session(self, row: CallSessionRow) -> tuple[str, str | None]:
        fresh = await asyncio.to_thread(self.tables.get_session, row.id, account_id=row.account_id)
        if fresh is None or fresh.ended_at is not None:
            return "skipped", ALREADY_ENDED
        # Only the process holding the turns may end a live call: elsewhere its buffer is
        # empty, and ending would summarise nothing of it (or part of it).
        row = await self.hold_session(fresh)
        now = self.clock()
        snapshot = self.buffer.clear(row.id)
        reason = skip_reason(
            connected_at=row.connected_at,
            ended_at=now,
            is_reminder=row.is_reminder,
            min_seconds=self.settings.min_session_seconds,
        )
        if reason is None and snapshot is None:
            reason = NO_TURNS
        outcome = "skipped" if reason is not None else "scheduled"
        if not await asyncio.to_thread(
            self.tables.mark_ended, row.id, now, outcome, account_id=row.account_id
        ):
            return "skipped", ALREADY_ENDED  # another process ended it first
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
            await asyncio.to_thread(
                self.tables.set_extracted,
                session.session_id,
                0,
                "failed",
                account_id=session.account_id,
            )
            return
        if outcome.erased:
            return  # the user was erased meanwhile: their call's row went with them
        self.metrics.session_summarized(
            seconds=outcome.seconds, created=outcome.created, duplicates=outcome.duplicates
        )
        status = "failed" if outcome.report.error else "done"
        await asyncio.to_thread(
            self.tables.set_extracted,
            session.session_id,
            outcome.created,
            status,
            account_id=session.account_id,
        )
        written = outcome.created
        try:
            # The call's long user turns, read from the buffer's snapshot (never stored).
            reports = await self.multifact.conversation_ended(session)
            written += sum(r.stored for r in reports)
        except Exception as exc:  # extraction's memories stay; the pass is not retried
            log.error("multifact at the end of a call failed: %s", type(exc).__name__)
        if written:
            # New memories of an ended call: a worker may draw the user's insights from them.
            await asyncio.to_thread(
                enqueue_insights,
                self.engine,
                self.metered_llm,
                account_id=session.account_id,
                user_id=session.user_id,
                session_id=session.session_id,
            )

    @functools.cached_property
    def multifact(self) -> MultiFactTrigger:
        """The multi-fact pass of the conversation text this service receives: a saved chat
        message's is queued for the job worker, a call's runs when the call ends (see
        :mod:`confide.workers.multifact_trigger`)."""
        return MultiFactTrigger(
            self.engine,
            self.metered_llm,
            self.settings,
            dedup=self.dedup,
            proposals=self.proposals,
            ledger=self.usage,
            queues=True,
        )

    def adapter(
        self,
        session_id: str,
        *,
        instructions: str | None = None,
        dispatcher: Dispatcher | None = None,
        reader: str = "default",
        categories: Sequence[str] | None = None,
    ) -> RealtimeAdapter:
        """A Realtime adapter for an open session, wired to this service.

        ``dispatcher`` replaces the service's own for this adapter (the realtime socket
        runs tool calls under its API key); ``reader`` is the agent its delta header is
        delivered to; ``categories`` are the memory categories its instructions may carry.
        """
        return RealtimeAdapter(
            buffer=self.buffer,
            session_id=session_id,
            dispatcher=dispatcher or self.dispatcher,
            memories=self.loader,
            instructions=instructions or self.options.agent_instructions,
            deltas=self.loader,
            reader=reader,
            categories=categories,
        )

    def active_memories(self, *, account_id: str, user_id: str) -> Sequence[Memory]:
        """A user's active memories, newest first (for listings)."""
        return self.loader.load_sync(account_id=account_id, user_id=user_id)
