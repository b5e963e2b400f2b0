"""The scrubs feature's table: what an erasure, a purge or a rotation still owes the files."""

from __future__ import annotations

from confide.storage.base import Storage
from confide.storage.scrubs import ScrubState, SqlScrubTables
from confide.testing.conformance.harness import StorageHarness


class ScrubsConformance(StorageHarness):
    """Owed scrubs are kept across accounts, oldest first, until one is settled."""

    def test_a_recorded_scrub_is_pending_until_settled(self, storage: Storage) -> None:
        scrubs = SqlScrubTables(storage.database)
        erasure = scrubs.record(kind="erasure", account_id="acct-1", markers="m1", now=2.0)
        purge = scrubs.record(kind="purge", account_id=None, markers="", now=1.0)
        assert [s.id for s in scrubs.pending()] == [purge.id, erasure.id]
        assert [s.id for s in scrubs.pending(limit=1)] == [purge.id]
        scrubs.settle(erasure.id, state=ScrubState.PENDING, detail="WAL in use", now=3.0)
        scrubs.settle(erasure.id, state=ScrubState.VERIFIED, detail="scan clean", now=4.0)
        assert [s.id for s in scrubs.pending()] == [purge.id]
        settled = scrubs.get(erasure.id)
        assert settled is not None
        assert (settled.state, settled.attempts, settled.detail) == ("verified", 2, "scan clean")
        assert (settled.markers, settled.created_at, settled.updated_at) == ("m1", 2.0, 4.0)

    def test_an_unknown_scrub_is_none(self, storage: Storage) -> None:
        assert SqlScrubTables(storage.database).get("no-such-scrub") is None
