"""A worker running in a thread of a serving process (``confide serve`` on SQLite)."""

from __future__ import annotations

import logging
import threading

from confide.workers.worker import Worker

__all__ = ["WorkerThread"]

log = logging.getLogger(__name__)


class WorkerThread:
    """Runs ``worker`` in a daemon thread from :meth:`start` until :meth:`stop`."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the worker's thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start polling for due jobs."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self.worker.run_forever, args=(self._stop,), name="confide-worker", daemon=True
        )
        self._thread.start()
        log.info("background worker started")

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the worker to stop after its current job and wait for it; whether it stopped
        within ``timeout`` (``None``: wait as long as the job runs)."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped
