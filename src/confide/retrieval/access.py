"""``last_accessed_at`` bookkeeping off the query's critical path.

Queries hand the ids they returned to :class:`AccessTracker`, which writes them in one batch
from a background thread; a query never waits for that write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable

from confide.storage.base import MemoryRows

log = logging.getLogger(__name__)


class AccessTracker:
    """Collects accessed memory ids and flushes them every ``interval`` seconds."""

    def __init__(self, storage: MemoryRows, *, interval: float = 2.0) -> None:
        self._storage = storage
        self._interval = interval
        self._pending: dict[str, set[str]] = defaultdict(set)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def record(self, account_id: str, memory_ids: Iterable[str]) -> None:
        """Note that these memories were read (returns at once)."""
        with self._lock:
            self._pending[account_id].update(memory_ids)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._run, name="confide-access", daemon=True
                )
                self._thread.start()

    def flush(self) -> int:
        """Write everything pending now; returns how many ids were written."""
        with self._lock:
            pending, self._pending = self._pending, defaultdict(set)
        written = 0
        now = time.time()
        for account_id, ids in pending.items():
            try:
                self._storage.touch(account_id, sorted(ids), now)
                written += len(ids)
            except Exception:  # bookkeeping must never break a query
                log.warning("could not record memory access times", exc_info=False)
        return written

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
