"""Scrubs owed by erasures, purges and key rotations, settled until verified.

An erasure (a purge, a rotation) deletes rows and keys at once, but their bytes stay in the
store's files until a scrub clears them, and a scrub can be refused for a while: a reader
holds SQLite's WAL, the PostgreSQL role lacks a grant, the server is down. So each records
the scrub it owes (:mod:`confide.storage.scrubs`, with the markers of what it deleted), runs
it at once, and scans the files where they are readable here. What is not finished stays
``pending``: a ``scrub`` job retries it with backoff, the hourly purge retries every pending
one, and nothing reports it done before a scrub completed and a scan found no marker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from confide.engine.core import EngineCore
from confide.engine.residue import decode_markers, encode_markers, scan_files
from confide.errors import NotFoundError, StorageError
from confide.storage.jobs import SqlJobTables
from confide.storage.scrubs import ScrubOutcome, ScrubRow, ScrubState, ScrubTables, SqlScrubTables
from confide.types import ResidueMarkers, ResidueScan, ScrubReport

__all__ = ["SCRUB_JOB", "EngineScrubbing"]

log = logging.getLogger(__name__)

SCRUB_JOB = "scrub"
"""The job kind that retries a pending scrub (payload: ``scrub_id``)."""

_JOB_ATTEMPTS = 40
"""With the worker's backoff doubling up to six hours, about a week of retries; the hourly
purge keeps retrying every pending scrub after that."""


class EngineScrubbing(EngineCore):
    """Records, runs and verifies the scrubs the lifecycle operations owe."""

    def _scrub_tables(self) -> ScrubTables:
        """The owed scrubs, kept in the engine's store."""
        return SqlScrubTables(self.storage.database)

    def owe_scrub(
        self,
        kind: str,
        account_id: str | None,
        markers: ResidueMarkers,
        *,
        scrubbed: Callable[[], None] | None = None,
    ) -> tuple[ScrubReport, dict[str, str]]:
        """Record a scrub owed by ``kind`` (``erasure``, ``purge``, ``rotation``), run it at
        once, and return where it stands with what each store's scrub did. ``scrubbed`` is
        called between the scrub and the scan."""
        row = self._scrub_tables().record(
            kind=kind, account_id=account_id, markers=encode_markers(markers), now=time.time()
        )
        return self._settle(row, retry=True, scrubbed=scrubbed)

    def settle_scrub(self, scrub_id: str, *, retry: bool = True) -> ScrubReport:
        """Run a recorded scrub again and scan for its markers; where it stands now.

        ``retry``: while it stays pending, make sure a ``scrub`` job will try again (the job
        itself passes ``False``: the worker's backoff retries it). Raises
        :class:`NotFoundError` for an unknown id.
        """
        row = self._scrub_tables().get(scrub_id)
        if row is None:
            raise NotFoundError("no such scrub")
        if row.state != ScrubState.PENDING:
            return _report(row)
        return self._settle(row, retry=retry)[0]

    def wait_for_scrub(
        self,
        scrub_id: str,
        *,
        timeout: float,
        on_pending: Callable[[ScrubReport], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> ScrubReport:
        """Retry a pending scrub (backing off from half a second to five) until it is no
        longer pending or ``timeout`` seconds have passed; where it stands then.
        ``on_pending`` hears each attempt that left it pending (what blocks it)."""
        deadline = clock() + timeout
        delay = 0.5
        report = self.settle_scrub(scrub_id)
        while report.status == ScrubState.PENDING and clock() < deadline:
            if on_pending is not None:
                on_pending(report)
            sleep(min(delay, max(0.0, deadline - clock())))
            delay = min(5.0, delay * 2)
            report = self.settle_scrub(scrub_id)
        return report

    def retry_scrubs(self, *, limit: int = 100) -> list[ScrubReport]:
        """Settle every pending scrub (oldest first); where each stands now."""
        return [
            self._settle(row, retry=False)[0] for row in self._scrub_tables().pending(limit=limit)
        ]

    def scrub_report(self, scrub_id: str, *, account_id: str | None = None) -> ScrubReport | None:
        """Where a recorded scrub stands (without running it); with ``account_id``, only a
        scrub of that account."""
        row = self._scrub_tables().get(scrub_id)
        if row is None or (account_id is not None and row.account_id != account_id):
            return None
        return _report(row)

    def residue_files(self) -> list[Path] | None:
        """The data and key-store files readable here (None when either store's are not)."""
        try:
            files = [*self.storage.data_files(), *self.key_store.data_files()]
        except StorageError:
            return None
        return list(dict.fromkeys(files))

    def scrub_stores(self, *, rebuild: bool = False) -> dict[str, ScrubOutcome]:
        """Scrub the data store and the key store once each (``rebuild``: rewrite them
        whole, see :meth:`confide.storage.base.Storage.scrub`)."""
        return {
            "data": self.storage.scrub(rebuild=rebuild),
            "keys": self.key_store.scrub(rebuild=rebuild),
        }

    def _settle(
        self, row: ScrubRow, *, retry: bool, scrubbed: Callable[[], None] | None = None
    ) -> tuple[ScrubReport, dict[str, str]]:
        outcomes = self.scrub_stores()
        if scrubbed is not None:
            scrubbed()
        blocked = _blocked(outcomes)
        markers = decode_markers(row.markers)
        scan: ResidueScan | None = None
        if blocked:
            state, detail = ScrubState.PENDING, "; ".join(blocked)
        elif not markers.key_ids and not markers.fragments:
            state, detail = ScrubState.SCRUBBED, "scrubbed (nothing to look for)"
        elif (files := self.residue_files()) is None:
            state, detail = (
                ScrubState.SCRUBBED,
                "scrubbed; the store's files are not readable from this process: run "
                "'confide verify-erasure' with the receipt on the database's host",
            )
        elif not files:
            state, detail = ScrubState.SCRUBBED, "scrubbed (the store keeps no file on disk)"
        else:
            scan = scan_files(files, markers)
            if scan.occurrences:
                # Stale copies a page rebuild left (see SqliteStorage.scrub): rewrite the
                # stores whole once, and look again.
                outcomes = self.scrub_stores(rebuild=True)
                blocked = _blocked(outcomes)
                if not blocked:
                    scan = scan_files(files, markers)
            if blocked:
                state, detail = ScrubState.PENDING, "; ".join(blocked)
            elif scan.occurrences:
                places = sorted({f.file for f in scan.found})
                state, detail = (
                    ScrubState.PENDING,
                    f"{scan.occurrences} markers still found in {', '.join(places)}",
                )
            else:
                state, detail = ScrubState.VERIFIED, f"no marker in {scan.files_read} files"
        now = time.time()
        self._scrub_tables().settle(row.id, state=state, detail=detail, now=now)
        self.emit_op("admin", "scrub", account_id=row.account_id, status=state)
        if state == ScrubState.PENDING:
            log.warning("%s scrub %s pending: %s", row.kind, row.id, detail)
            if retry:
                self._enqueue_retry(row.id, now)
        report = ScrubReport(
            id=row.id,
            kind=row.kind,
            status=state,
            detail=detail,
            attempts=row.attempts + 1,
            scan=scan,
        )
        return report, {name: o.detail for name, o in outcomes.items()}

    def _enqueue_retry(self, scrub_id: str, now: float) -> None:
        SqlJobTables(self.storage.database).enqueue(
            SCRUB_JOB,
            account_id=None,
            payload={"scrub_id": scrub_id},
            run_at=now + self.settings.worker_backoff_seconds,
            now=now,
            dedupe_key=f"{SCRUB_JOB}:{scrub_id}",
            max_attempts=_JOB_ATTEMPTS,
        )


def _blocked(outcomes: dict[str, ScrubOutcome]) -> list[str]:
    """What blocked each store's scrub that did not complete."""
    return [o.blocked_by for o in outcomes.values() if o.blocked_by is not None]


def _report(row: ScrubRow) -> ScrubReport:
    return ScrubReport(
        id=row.id,
        kind=row.kind,
        status=row.state,
        detail=row.detail,
        attempts=row.attempts,
    )
