"""A listing of one category reads that category's index range, whatever the statistics say."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.storage.listing_plans import sqlite_listing_plan

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.sqlite import SqliteStorage
from confide.testing.conformance.harness import TEST_KEK
from confide.types import MemoryFilter


@pytest.mark.parametrize("categories", [("preference",), ("preference", "follow_up")])
def test_a_rare_category_is_listed_through_the_category_index(
    tmp_path: Path, settings: Settings, categories: tuple[str, ...]
) -> None:
    storage = SqliteStorage(str(tmp_path / "confide.db"), features=FEATURES)
    storage.migrate()
    engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK), settings=settings)
    try:
        # One common category and statistics that know it: SQLite then prices each value
        # it is asked for, and read ``category IN (?)`` for one value as a scan of the table.
        engine.store_many(
            [
                {
                    "account_id": "acct",
                    "user_id": "u1" if i % 10 else f"other{i % 7}",
                    "key": "note",
                    "value": f"memory {i}",
                    "category": "fact",
                }
                for i in range(2000)
            ]
        )
        with storage.transaction() as tx:
            tx.run("ANALYZE")
        # The statement ``list_memories`` sends for the agent's ``context: all`` categories.
        flt = MemoryFilter(account_id="acct", user_id="u1", categories=categories)
        details = sqlite_listing_plan(storage, flt, 50)
        assert "USING INDEX memories_category" in details, details
    finally:
        storage.close()
