"""The job kinds a standard worker runs, and where further kinds are registered.

:func:`standard_worker` builds the worker ``engram worker`` and ``engram serve`` run. It
registers the lifecycle jobs (``ttl``, ``purge``). Jobs of other kinds are plain callables
taking a :class:`~engram.workers.worker.JobContext`; register them in
:func:`register_memory_jobs` below, naming whether they call the LLM (then the account's
token budget is consulted before each run):

- ``consolidation`` (daily per account, scheduled in
  :data:`~engram.workers.schedules.DEFAULT_SCHEDULES`: enqueued once its handler is here),
- ``insights`` and ``multifact`` (enqueued by writes through :func:`engram.workers.enqueue`),
- chat summaries and app compaction, when they move onto the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engram.config import Settings
from engram.embedders.base import Embedder
from engram.engine import MemoryEngine
from engram.llm.base import LLM
from engram.llm.usage import UsageLedger
from engram.workers.lifecycle import purge_job, ttl_job
from engram.workers.memory_jobs import MemoryJobs
from engram.workers.schedules import DEFAULT_SCHEDULES
from engram.workers.worker import Worker

__all__ = ["register_lifecycle_jobs", "register_memory_jobs", "standard_worker"]


def register_lifecycle_jobs(worker: Worker) -> None:
    """Register the ``ttl`` and ``purge`` jobs (no LLM)."""
    worker.register("ttl", ttl_job)
    worker.register("purge", purge_job)


def register_memory_jobs(
    worker: Worker,
    *,
    embedder: Embedder | None = None,
    llm: LLM | None = None,
    usage: UsageLedger | None = None,
) -> None:
    """Register consolidation, insights and the multi-fact pass (see
    :mod:`engram.workers.memory_jobs`). Without ``llm`` consolidation judges offline with
    ``embedder``, and the other two skip."""
    MemoryJobs(embedder=embedder, llm=llm, ledger=usage).register(worker)


def standard_worker(
    engine: MemoryEngine,
    settings: Settings,
    *,
    usage: UsageLedger | None = None,
    embedder: Embedder | None = None,
    llm: LLM | None = None,
    clock: Callable[[], float] | None = None,
) -> Worker:
    """The worker with every standard job kind and schedule registered (``embedder`` and
    ``llm``, the metered model, for the memory jobs)."""
    worker = Worker(
        engine, settings, usage=usage, clock=clock or time.time, schedules=DEFAULT_SCHEDULES
    )
    register_lifecycle_jobs(worker)
    register_memory_jobs(worker, embedder=embedder, llm=llm, usage=usage)
    return worker
