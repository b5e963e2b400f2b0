"""The newest memory of a run is found through the run index, not a scan of the table."""

from __future__ import annotations

from pathlib import Path

from tests.storage.listing_plans import sqlite_listing_plan

from confide.storage import FEATURES
from confide.storage.sqlite import SqliteStorage
from confide.types import MemoryFilter, utcnow


def test_the_newest_memory_of_a_run_is_read_through_the_run_index(tmp_path: Path) -> None:
    storage = SqliteStorage(str(tmp_path / "confide.db"), features=FEATURES)
    storage.migrate()
    try:
        flt = MemoryFilter(
            account_id="acct", user_id="u1", run_id="call-1", created_before=utcnow()
        )
        # The statement ``list_memories`` sends for a run's newest memories stored before a
        # given one (the indexer's lookup of the previous turn).
        details = sqlite_listing_plan(storage, flt, 2)
        assert "memories_run" in details, details
    finally:
        storage.close()
