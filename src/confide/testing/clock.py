"""Instants for tests that own their clock, chosen against the worker's schedules so that a
test's outcome never depends on the hour it runs at."""

from __future__ import annotations

from confide.workers.schedules import DAY, HOUR, MINUTE, stagger

__all__ = ["before_consolidation"]


def before_consolidation(account_id: str, now: float) -> float:
    """A moment of ``now``'s UTC day when a worker enqueues the hourly schedules only.

    It is a minute into the hour before the one in which ``account_id``'s daily consolidation
    falls: the consolidation is at least an hour away and the next hourly period almost an hour.

    Raises:
        ValueError: the account consolidates in the first hour of the day (pick another id).
    """
    offset = stagger(account_id, DAY)
    if offset < HOUR:
        raise ValueError(f"{account_id!r} consolidates in the day's first hour")
    return now - now % DAY + offset - offset % HOUR - HOUR + MINUTE
