"""Enqueueing jobs triggered by writes (insights, multi-fact pass, summaries, compaction)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confide.engine import MemoryEngine
from confide.storage.jobs import SqlJobTables

__all__ = ["enqueue"]


def enqueue(
    engine: MemoryEngine,
    kind: str,
    *,
    account_id: str | None,
    payload: Mapping[str, Any] | None = None,
    dedupe_key: str | None = None,
    delay: float = 0.0,
    max_attempts: int | None = None,
    while_queued: bool = False,
) -> str | None:
    """Queue a job of ``kind`` to run as soon as a worker is free (or after ``delay`` s).

    ``payload`` holds ids and kinds only (never memory text or messages: the handler reads
    what it needs from the store); a malformed one raises
    :class:`~confide.errors.ValidationError`. With ``dedupe_key`` a second enqueue of the
    same key adds nothing (returns ``None``); otherwise returns the new job's id. With
    ``while_queued`` the key dedupes only against a job not yet started (see
    :meth:`~confide.storage.jobs.JobTables.enqueue`).
    """
    now = time.time()
    return SqlJobTables(engine.storage.database).enqueue(
        kind,
        account_id=account_id,
        payload=dict(payload or {}),
        run_at=now + delay,
        now=now,
        dedupe_key=dedupe_key,
        max_attempts=max_attempts or engine.settings.worker_max_attempts,
        while_queued=while_queued,
    )
