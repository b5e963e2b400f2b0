"""The job kinds a standard worker runs, and where further kinds are registered.

:func:`standard_worker` builds the worker ``confide worker`` and ``confide serve`` run. It
registers the lifecycle jobs (``ttl``, ``purge``). Jobs of other kinds are plain callables
taking a :class:`~confide.workers.worker.JobContext`; register them in
:func:`register_memory_jobs` below, naming whether they call the LLM (then the account's
token budget is consulted before each run):

- ``consolidation`` (daily per account, scheduled in
  :data:`~confide.workers.schedules.DEFAULT_SCHEDULES`: enqueued once its handler is here),
- ``insights`` and ``multifact`` (enqueued by writes through :func:`confide.workers.enqueue`),
- ``chat_summary`` and ``app_resume`` (:mod:`confide.workers.conversation_jobs`): chat
  rolling summaries queued by saved messages, app memory work the budget deferred.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cached_property

from confide.apps import AppMemories
from confide.chat import ChatMemory
from confide.config import Settings
from confide.embedders.base import Embedder
from confide.engine import MemoryEngine
from confide.engine.scrubbing import SCRUB_JOB
from confide.llm.base import LLM
from confide.llm.usage import UsageLedger
from confide.workers.conversation_jobs import ConversationJobs, ConversationParts
from confide.workers.lifecycle import purge_job, scrub_job, ttl_job
from confide.workers.memory_jobs import MemoryJobs
from confide.workers.schedules import DEFAULT_SCHEDULES
from confide.workers.worker import Worker

__all__ = [
    "register_conversation_jobs",
    "register_lifecycle_jobs",
    "register_memory_jobs",
    "standard_worker",
]


def register_lifecycle_jobs(worker: Worker) -> None:
    """Register the ``ttl``, ``purge`` and ``scrub`` jobs (no LLM)."""
    worker.register("ttl", ttl_job)
    worker.register("purge", purge_job)
    worker.register(SCRUB_JOB, scrub_job)


def register_memory_jobs(
    worker: Worker,
    *,
    embedder: Embedder | None = None,
    llm: LLM | None = None,
    usage: UsageLedger | None = None,
) -> None:
    """Register consolidation, insights and the multi-fact pass (see
    :mod:`confide.workers.memory_jobs`). Without ``llm`` consolidation judges offline with
    ``embedder``, and the other two skip."""
    MemoryJobs(embedder=embedder, llm=llm, ledger=usage).register(worker)


def register_conversation_jobs(
    worker: Worker, parts: ConversationParts, *, uses_llm: bool = True
) -> None:
    """Register ``chat_summary`` and ``app_resume`` over ``parts`` (its chat memory and app
    memories; see :mod:`confide.workers.conversation_jobs`)."""
    ConversationJobs(parts, uses_llm=uses_llm).register(worker)


class _Parts:
    """Chat memory and app memories built from a worker's own parts, on first use."""

    def __init__(
        self,
        engine: MemoryEngine,
        settings: Settings,
        *,
        usage: UsageLedger | None,
        embedder: Embedder | None,
        llm: LLM | None,
    ) -> None:
        self._engine, self._settings = engine, settings
        self._usage, self._embedder, self._llm = usage, embedder, llm

    @cached_property
    def chat(self) -> ChatMemory:
        return ChatMemory(
            self._engine,
            settings=self._settings,
            embedder=self._embedder,
            llm=self._llm,
            ledger=self._usage,
        )

    @cached_property
    def apps(self) -> AppMemories:
        return AppMemories(self._engine, settings=self._settings, llm=self._llm, ledger=self._usage)


def standard_worker(
    engine: MemoryEngine,
    settings: Settings,
    *,
    usage: UsageLedger | None = None,
    embedder: Embedder | None = None,
    llm: LLM | None = None,
    clock: Callable[[], float] | None = None,
    conversations: ConversationParts | None = None,
) -> Worker:
    """The worker with every standard job kind and schedule registered (``embedder`` and
    ``llm``, the metered model, for the memory jobs; ``conversations``, the chat memory and
    app memories the conversation jobs run on, by default built from the same parts)."""
    worker = Worker(
        engine, settings, usage=usage, clock=clock or time.time, schedules=DEFAULT_SCHEDULES
    )
    register_lifecycle_jobs(worker)
    register_memory_jobs(worker, embedder=embedder, llm=llm, usage=usage)
    parts = conversations or _Parts(engine, settings, usage=usage, embedder=embedder, llm=llm)
    register_conversation_jobs(worker, parts)
    return worker
