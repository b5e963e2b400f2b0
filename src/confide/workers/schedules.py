"""Recurring jobs: when each occurrence is due, and the dedupe key that enqueues it once.

An occurrence is named by its kind, its period (the UTC hour or day it belongs to) and, for
per-account schedules, the account; enqueueing it again (any worker, any number of times)
adds nothing. Per-account daily jobs are staggered over the day by a stable hash of the
account, so a thousand accounts do not all consolidate at midnight.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_SCHEDULES", "DueJob", "Schedule", "due_schedules", "stagger"]

MINUTE = 60.0
HOUR = 3600.0
DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Schedule:
    """A job kind enqueued every ``period`` seconds (once per account when ``per_account``)."""

    kind: str
    period: float
    per_account: bool = False


@dataclass(frozen=True, slots=True)
class DueJob:
    """One occurrence of a schedule, ready to enqueue."""

    kind: str
    account_id: str | None
    run_at: float
    dedupe_key: str
    payload: dict[str, Any]


DEFAULT_SCHEDULES: tuple[Schedule, ...] = (
    Schedule("ttl", HOUR),
    Schedule("purge", HOUR),
    Schedule("consolidation", DAY, per_account=True),
    Schedule("app_resume", HOUR),
)
"""TTL and purge hourly; consolidation daily per account; app memory work the budget
deferred hourly (each enqueued only by a worker that has a handler for it)."""


def stagger(account_id: str, period: float) -> float:
    """A stable offset in ``[0, period)`` for an account (the same on every host)."""
    digest = hashlib.sha256(account_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % int(period)


def due_schedules(schedule: Schedule, now: float, accounts: Sequence[str]) -> Iterator[DueJob]:
    """The occurrences of ``schedule`` in the period that contains ``now``."""
    start = now - now % schedule.period
    if schedule.period < HOUR:
        form = "%Y-%m-%dT%H:%M"
    else:
        form = "%Y-%m-%dT%H" if schedule.period < DAY else "%Y-%m-%d"
    label = time.strftime(form, time.gmtime(start))
    if not schedule.per_account:
        yield DueJob(schedule.kind, None, start, f"{schedule.kind}:{label}", {})
        return
    for account_id in accounts:
        yield DueJob(
            schedule.kind,
            account_id,
            start + stagger(account_id, schedule.period),
            f"{schedule.kind}:{account_id}:{label}",
            {"account_id": account_id},
        )
