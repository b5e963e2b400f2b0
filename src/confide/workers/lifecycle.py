"""The lifecycle jobs: TTL (retire idle and expired memories) and purge (hourly both)."""

from __future__ import annotations

from confide.chat.messages import MessageStore
from confide.workers.worker import JobContext

__all__ = ["JOB_RETENTION_DAYS", "purge_job", "ttl_job"]

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
    and edges), chat messages summarised longer ago than their retention, and finished jobs
    older than :data:`JOB_RETENTION_DAYS`. Returns how many memory versions were purged."""
    report = ctx.engine.purge_expired(now=ctx.now)
    MessageStore(ctx.engine).purge(retention_days=ctx.settings.message_retention_days, now=ctx.now)
    ctx.engine.storage.job_tables().prune_jobs(ctx.now - JOB_RETENTION_DAYS * 86_400.0)
    return report.purged
