"""Background jobs: a queue kept in the store, the worker that runs it, and its jobs.

See ``docs/workers.md``. :func:`standard_worker` is what ``confide worker`` runs;
:func:`enqueue` queues a job triggered by a write. The jobs are plain callables a worker runs
off the hot path:

* ``ttl`` and ``purge`` (:mod:`confide.workers.lifecycle`);
* :class:`~confide.workers.insights.InsightWriter` (``run_user``): insights about a user;
* :class:`~confide.workers.multifact.MultiFactPass` (``run_turn``, ``run_message``): the
  facts a long user turn states;
* ``chat_summary`` and ``app_resume`` (:mod:`confide.workers.conversation_jobs`).
"""

from confide.workers.queue import enqueue
from confide.workers.registry import (
    register_conversation_jobs,
    register_lifecycle_jobs,
    register_memory_jobs,
    standard_worker,
)
from confide.workers.schedules import DEFAULT_SCHEDULES, Schedule
from confide.workers.service import WorkerThread
from confide.workers.worker import Handler, JobContext, JobSpec, RunReport, Worker

__all__ = [
    "DEFAULT_SCHEDULES",
    "Handler",
    "JobContext",
    "JobSpec",
    "RunReport",
    "Schedule",
    "Worker",
    "WorkerThread",
    "enqueue",
    "register_conversation_jobs",
    "register_lifecycle_jobs",
    "register_memory_jobs",
    "standard_worker",
]
