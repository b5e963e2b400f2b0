"""The lifecycle jobs: TTL (retire idle and expired memories) and purge (hourly both)."""

from __future__ import annotations

from confide.chat.messages import MessageStore
from confide.errors import ConflictError
from confide.storage.jobs import SqlJobTables
from confide.workers.worker import JobContext

__all__ = ["JOB_RETENTION_DAYS", "ScrubPendingError", "purge_job", "scrub_job", "ttl_job"]

JOB_RETENTION_DAYS = 7.0
"""Days finished jobs stay in the queue (their dedupe keys keep schedules idempotent)."""


def ttl_job(ctx: JobContext) -> int:
    """Soft-delete memories idle past ``CONFIDE_TTL_IDLE_DAYS`` with importance below
    ``CONFIDE_TTL_IMPORTANCE_BELOW`` and not pinned, or past their ``expires_at``.

    Idempotent: each memory is a compare-and-set on its locked head, so a retried job
    retires nothing twice. Returns how many memories were retired.
    """
    return ctx.engine.expire_idle(
        idle_days=ctx.settings.ttl_idle_days,
        importance_below=ctx.settings.ttl_importance_below,
        now=ctx.now,
        should_stop=ctx.should_stop,
    )


def purge_job(ctx: JobContext) -> int:
    """Hard-delete memories past their ``purge_at`` (every version with its tokens, vectors
    and edges), chat messages summarised longer ago than their retention (when the operator
    set one: ``CONFIDE_MESSAGE_RETENTION_DAYS``), and finished jobs
    older than :data:`JOB_RETENTION_DAYS`. Returns how many memory versions were purged."""
    report = ctx.engine.purge_expired(now=ctx.now)
    MessageStore(ctx.engine).purge(retention_days=ctx.settings.message_retention_days, now=ctx.now)
    SqlJobTables(ctx.engine.storage.database).prune_jobs(ctx.now - JOB_RETENTION_DAYS * 86_400.0)
    # Scrubs still pending after their own job gave up are retried here, hourly, for good.
    ctx.engine.retry_scrubs()
    return report.purged


class ScrubPendingError(ConflictError):
    """A scrub is still refused or its scan still finds markers: the job is retried."""


def scrub_job(ctx: JobContext) -> str:
    """Run a pending scrub again (an erasure's, a purge's or a rotation's) and scan for what
    it must have cleared; raises :class:`ScrubPendingError` while it stays pending, so the
    worker retries it with backoff. Returns the scrub's status."""
    report = ctx.engine.settle_scrub(str(ctx.payload["scrub_id"]), retry=False)
    if report.status == "pending":
        raise ScrubPendingError("the scrub is still pending")
    return report.status
