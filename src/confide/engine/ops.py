"""Operational events: what each node of the system did, written in batches off its path.

An event names a node (``hotpath``, ``context``, ``episodic``, ``worker``, ...), an operation
(``classify``, ``search``, ``create``, ``update``, ``merge``, ``link``, ``ttl``, ...), a status
and ids; never a value, a key in clear or a transcript. :class:`OpsLog` queues events and a
background thread writes them in one transaction every ``interval`` seconds, so recording
one costs the caller a list append and can never fail the operation it describes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import timedelta
from typing import Protocol

from confide.errors import ValidationError
from confide.storage.base import OpRow, Storage

__all__ = ["NODES", "OpsLog", "OpsSink", "op_row", "parse_window"]

log = logging.getLogger(__name__)

NODES: tuple[str, ...] = ("hotpath", "context", "episodic", "worker", "proposals", "admin")
"""The nodes Confide's own paths record events under (others may add their own)."""


class OpsSink(Protocol):
    """Where a path records what it did (:meth:`MemoryEngine.emit_op`)."""

    def emit_op(
        self,
        node: str,
        op: str,
        *,
        account_id: str | None,
        user_id: str | None = None,
        thread_id: str | None = None,
        status: str = "ok",
        memory_id: str | None = None,
        category: str | None = None,
        sim: float | None = None,
    ) -> None:
        """Queue one event (never raises)."""
        ...


class OpsLog:
    """Queues operational events and writes them in batches from a background thread.

    Args:
        storage: where events are written.
        interval: seconds between background flushes.
        max_pending: events held at most; beyond it new ones are dropped (and counted), so a
            store that cannot be written never grows the process without bound.
    """

    def __init__(self, storage: Storage, *, interval: float = 2.0, max_pending: int = 50_000):
        self._storage = storage
        self._interval = interval
        self._max_pending = max_pending
        self._pending: list[OpRow] = []
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def emit(self, row: OpRow) -> None:
        """Queue one event (returns at once; never raises)."""
        with self._lock:
            if len(self._pending) >= self._max_pending:
                self.dropped += 1
                return
            self._pending.append(row)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="confide-ops", daemon=True)
                self._thread.start()

    def flush(self) -> int:
        """Write everything queued now, in one transaction; returns how many events."""
        # One flush at a time, so a reader that flushes before counting sees every event
        # queued before it, even those a background flush had taken but not yet written.
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return 0
            by_account: dict[str | None, list[OpRow]] = {}
            for row in batch:
                by_account.setdefault(row.account_id, []).append(row)
            try:
                # One transaction per account: on PostgreSQL each is confined to its account.
                for rows in by_account.values():
                    with self._storage.transaction() as tx:
                        tx.record_ops(rows)
            except Exception as exc:  # bookkeeping must never break what it records
                log.warning(
                    "could not record %d operational events: %s", len(batch), type(exc).__name__
                )
                return 0
            return len(batch)

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self._interval)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Flush and stop the background thread."""
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()


def op_row(
    node: str,
    op: str,
    *,
    account_id: str | None,
    user_id: str | None = None,
    thread_id: str | None = None,
    status: str = "ok",
    memory_id: str | None = None,
    category: str | None = None,
    sim: float | None = None,
    ts: float | None = None,
) -> OpRow:
    """One event as a row (``ts`` now unless given)."""
    return OpRow(
        account_id,
        user_id,
        thread_id,
        node,
        op,
        status,
        memory_id,
        category,
        sim,
        time.time() if ts is None else ts,
    )


_WINDOW = re.compile(r"^\s*(\d{1,4})\s*([mhd])\s*$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
MAX_WINDOW = timedelta(days=366)


def parse_window(text: str) -> timedelta:
    """``"30m"``, ``"12h"``, ``"1d"``, ``"7d"``: a look-back window of minutes, hours or days.

    Raises:
        ValidationError: anything else, a zero window, or one longer than 366 days.
    """
    match = _WINDOW.match(text)
    if match is None:
        raise ValidationError("since must be a number and a unit: m, h or d (e.g. 30m, 12h, 1d)")
    window = timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    if not timedelta(0) < window <= MAX_WINDOW:
        raise ValidationError("since must be more than 0 and at most 366 days")
    return window
