"""The background worker: claims due jobs from the store's queue and runs their handlers.

A worker holds a registry of job kinds (``kind -> JobSpec``) and claims only those kinds.
Each claimed job is a lease (see :mod:`confide.storage.jobs`): while its handler runs, the
worker renews the lease; a handler that raises leaves its data as it was (its transaction
rolled back) and the job is retried later with exponential backoff, up to
``CONFIDE_WORKER_MAX_ATTEMPTS`` attempts; a handler that runs past
``CONFIDE_WORKER_JOB_TIMEOUT`` is given up on (its late completion is refused, rolling its
last transaction back) and retried the same way. A job of an LLM kind waits while the
account is over its daily token budget (the usage ledger), without losing an attempt.

Exactly once with effect: a handler that writes in one transaction marks its job done in
that same transaction (:meth:`JobContext.complete_within`), so either both commit or, when
the lease was lost to another worker meanwhile, neither does. A handler whose effects span
several transactions must be idempotent (the engine's transitions are compare-and-set, so
doing a TTL or a merge again changes nothing).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.llm.usage import UsageLedger
from confide.storage.base import Transaction
from confide.storage.jobs import (
    JobRow,
    JobState,
    JobTables,
    Lease,
    LeaseLostError,
    SqlJobTables,
)
from confide.types import Progress
from confide.workers.schedules import Schedule, due_schedules

__all__ = ["Handler", "JobContext", "JobSpec", "RunReport", "Worker"]

log = logging.getLogger(__name__)

_MAX_BACKOFF = 6 * 3600.0
_DAY = 86_400.0


class JobContext:
    """What a handler gets: the job, the engine, the clock and the way to finish.

    ``now`` is the worker's clock at the claim; ``payload`` the job's ids and kinds.
    """

    def __init__(
        self,
        lease: Lease,
        engine: MemoryEngine,
        settings: Settings,
        *,
        now: float,
        clock: Callable[[], float],
        deadline: float,
    ) -> None:
        self.lease = lease
        self.engine = engine
        self.settings = settings
        self.now = now
        self.clock = clock
        self._deadline = deadline
        self._given_up = threading.Event()

    @property
    def job(self) -> JobRow:
        """The job as claimed."""
        return self.lease.job

    @property
    def payload(self) -> dict[str, Any]:
        """The job's payload (ids and kinds only)."""
        return self.lease.job.payload

    def complete_within(self, tx: Transaction) -> None:
        """Mark the job done inside the handler's write transaction.

        The job's completion then commits with the handler's writes; when the lease was lost
        (another worker took the job after it expired) this raises
        :class:`~confide.storage.jobs.LeaseLostError` and the whole transaction rolls back.
        """
        SqlJobTables.complete_job(tx, self.lease, self.clock())

    def should_stop(self) -> bool:
        """Whether the handler should stop: the worker gave the job up (its runtime ran out
        or its lease was lost), and whatever it commits now is refused."""
        return self._given_up.is_set()

    def out_of_time(self) -> bool:
        """Whether the job's bounded runtime has run out."""
        return time.monotonic() >= self._deadline

    def give_up(self) -> None:
        """Tell the handler to stop (the worker retries the job elsewhere)."""
        self._given_up.set()


Handler = Callable[[JobContext], object]
"""A job handler: does the job's work; raises to have the job retried with backoff."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A registered job kind: its handler and whether it calls the LLM (token budget)."""

    handler: Handler
    uses_llm: bool = False


@dataclass(slots=True)
class RunReport:
    """What a worker run did, by outcome."""

    enqueued: int = 0
    done: int = 0
    retried: int = 0
    failed: int = 0
    deferred: int = 0
    lost: int = 0
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def ran(self) -> int:
        """Jobs claimed and run (whatever their outcome)."""
        return self.done + self.retried + self.failed + self.lost


class Worker:
    """Runs due jobs of the registered kinds from the store's queue.

    Args:
        engine: the memory engine the handlers work on (its storage keeps the queue).
        settings: lease, timeout, attempts, backoff and poll settings.
        usage: the LLM usage ledger, consulted before a job of an LLM kind.
        worker_id: names this worker in the lease rows (default: host, process, random).
        clock: wall-clock seconds (injectable for tests).
        schedules: the recurring jobs :meth:`enqueue_schedules` keeps enqueued.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        settings: Settings,
        *,
        usage: UsageLedger | None = None,
        worker_id: str | None = None,
        clock: Callable[[], float] = time.time,
        schedules: tuple[Schedule, ...] = (),
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.usage = usage
        self.worker_id = worker_id or f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.schedules = schedules
        self.registry: dict[str, JobSpec] = {}
        # Occurrences this worker has enqueued already: a poll adds no write for them.
        self._scheduled: set[str] = set()

    @property
    def queue(self) -> JobTables:
        """The job queue in the engine's store."""
        return SqlJobTables(self.engine.storage.database)

    def register(self, kind: str, handler: Handler, *, uses_llm: bool = False) -> None:
        """Run jobs of ``kind`` with ``handler`` (``uses_llm``: mind the token budget)."""
        self.registry[kind] = JobSpec(handler, uses_llm)

    def registered(self, registry: Mapping[str, JobSpec]) -> Worker:
        """Register every kind of ``registry``; returns this worker."""
        self.registry.update(registry)
        return self

    def enqueue_schedules(
        self, now: float | None = None, *, kinds: Collection[str] | None = None
    ) -> int:
        """Enqueue the due occurrence of every schedule whose kind is registered (and among
        ``kinds`` when given; each once: a dedupe key names the occurrence); how many were
        new."""
        moment = self.clock() if now is None else now
        queue = self.queue
        added = 0
        accounts: list[str] | None = None
        for schedule in self.schedules:
            if schedule.kind not in self.registry:
                continue
            if kinds is not None and schedule.kind not in kinds:
                continue
            if schedule.per_account and accounts is None:
                accounts = queue.account_ids()
            for due in due_schedules(schedule, moment, accounts or []):
                if due.dedupe_key in self._scheduled:
                    continue
                job_id = queue.enqueue(
                    schedule.kind,
                    account_id=due.account_id,
                    payload=due.payload,
                    run_at=due.run_at,
                    now=moment,
                    dedupe_key=due.dedupe_key,
                    max_attempts=self.settings.worker_max_attempts,
                )
                added += job_id is not None
                if len(self._scheduled) > 100_000:
                    self._scheduled.clear()
                self._scheduled.add(due.dedupe_key)
        return added

    def run_once(
        self,
        *,
        limit: int | None = None,
        kinds: Collection[str] | None = None,
        schedules: bool = True,
        progress: Progress | None = None,
    ) -> RunReport:
        """Enqueue due schedules, then run due jobs until none is left (or ``limit`` ran).

        ``kinds`` narrows both to those registered kinds; without ``schedules`` only jobs
        already queued run (e.g. a service draining the jobs its own requests queued).
        ``progress`` is told after each job how many ran (claimed or deferred) of a total
        not known."""
        report = RunReport(enqueued=self.enqueue_schedules(kinds=kinds) if schedules else 0)
        running = sorted(k for k in self.registry if kinds is None or k in kinds)
        while running and (limit is None or report.ran + report.deferred < limit):
            leases = self.queue.claim(
                self.worker_id,
                lease_seconds=self.settings.worker_lease_seconds,
                now=self.clock(),
                kinds=running,
            )
            if not leases:
                break
            for lease in leases:
                self._run(lease, report)
                if progress is not None:
                    progress(report.ran + report.deferred, None)
        return report

    def run_forever(self, stop: threading.Event, *, progress: Progress | None = None) -> None:
        """Run due jobs until ``stop`` is set, looking for new ones every poll interval.

        ``progress`` is told after each job how many ran since the worker started."""
        earlier = seen = 0  # jobs run before this pass, and so far

        def since_start(done: int, total: int | None) -> None:
            nonlocal seen
            seen = earlier + done
            if progress is not None:
                progress(seen, total)

        while not stop.is_set():
            earlier = seen
            try:
                report = self.run_once(progress=since_start)
            except Exception as exc:  # the store may be briefly unavailable: try again later
                log.warning("worker run failed: %s", type(exc).__name__)
                report = RunReport()
            if report.ran == 0:
                stop.wait(self.settings.worker_poll_seconds)

    # ---- one job ---------------------------------------------------------------------------
    def _run(self, lease: Lease, report: RunReport) -> None:
        job = lease.job
        spec = self.registry[job.kind]
        report.kinds[job.kind] = report.kinds.get(job.kind, 0) + 1
        if spec.uses_llm and self._over_budget(job):
            # Not an attempt: the job waits for the account's next budget day.
            assert self.usage is not None
            self.queue.postpone(lease, run_at=self.usage.day_start() + _DAY, now=self.clock())
            report.deferred += 1
            return
        ctx = JobContext(
            lease,
            self.engine,
            self.settings,
            now=self.clock(),
            clock=self.clock,
            deadline=time.monotonic() + self.settings.worker_job_timeout,
        )
        try:
            self._finish(ctx, self._supervise(ctx), report)
        finally:
            # After the queue moved on, so whatever a still-running handler commits is refused.
            ctx.give_up()

    def _finish(self, ctx: JobContext, error: str | None, report: RunReport) -> None:
        lease, job = ctx.lease, ctx.job
        if error is None:
            # Also true when the handler completed the job inside its own transaction.
            if self.queue.complete(lease, self.clock()):
                report.done += 1
            else:
                report.lost += 1
            return
        if error == LeaseLostError.__name__:
            report.lost += 1
            return
        log.warning("job %s (%s) failed: %s", job.id, job.kind, error)
        delay = min(_MAX_BACKOFF, self.settings.worker_backoff_seconds * 2 ** (job.attempts - 1))
        now = self.clock()
        state = self.queue.retry(lease, error=error, run_at=now + delay, now=now)
        if state == JobState.FAILED:
            report.failed += 1
        elif state is None:
            report.lost += 1
        else:
            report.retried += 1

    def _over_budget(self, job: JobRow) -> bool:
        return (
            self.usage is not None
            and job.account_id is not None
            and self.usage.must_defer(job.account_id)
        )

    def _supervise(self, ctx: JobContext) -> str | None:
        """Run the handler in a thread of its own, renewing the lease while it runs; the
        error's type name, ``"JobTimeout"`` when it ran too long, or ``None``."""
        outcome: list[str | None] = []
        handler = self.registry[ctx.job.kind].handler

        def target() -> None:
            try:
                handler(ctx)
            except BaseException as exc:  # reported by type name only: never a value
                outcome.append(type(exc).__name__)
            else:
                outcome.append(None)

        thread = threading.Thread(target=target, name=f"job-{ctx.job.kind}", daemon=True)
        thread.start()
        renew_every = max(0.05, self.settings.worker_lease_seconds / 3)
        completed = False  # the handler marked the job done in its own transaction
        while True:
            thread.join(renew_every)
            if not thread.is_alive():
                return outcome[0] if outcome else "JobCrashed"
            if ctx.out_of_time():
                return "JobTimeout"
            if completed:
                continue
            renewed = self.queue.renew(
                ctx.lease, lease_seconds=self.settings.worker_lease_seconds, now=self.clock()
            )
            if not renewed:
                # Refused either because another worker took the job, or because the handler
                # has just completed it (then it is returning: wait for it).
                job = self.queue.get_job(ctx.job.id)
                mine = job is not None and job.lease_token == ctx.lease.token
                if not (mine and job is not None and job.state == JobState.DONE):
                    return LeaseLostError.__name__
                completed = True
