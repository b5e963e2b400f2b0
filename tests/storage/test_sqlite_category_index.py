"""A listing of one category reads that category's index range, whatever the statistics say."""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.filters import compile_filter
from confide.storage.sqlite import SqliteStorage
from confide.types import MemoryFilter


@pytest.mark.parametrize("categories", [("preference",), ("preference", "follow_up")])
def test_a_rare_category_is_listed_through_the_category_index(
    tmp_path: Path, categories: tuple[str, ...]
) -> None:
    key = bytes(range(32))
    storage = SqliteStorage(str(tmp_path / "confide.db"), features=FEATURES)
    storage.migrate()
    engine = MemoryEngine(
        storage,
        KeyRing(primary=key),
        settings=Settings(home=tmp_path / "home", encryption_key=key.hex()),
    )
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
        where, params = compile_filter(
            MemoryFilter(account_id="acct", user_id="u1", categories=categories)
        )
        # The statement ``list_memories`` sends for the agent's ``context: all`` categories.
        with storage.transaction() as tx:
            plan = tx.run(
                f"EXPLAIN QUERY PLAN SELECT m.id FROM memories m WHERE {where} "
                "ORDER BY m.updated_at DESC, m.id DESC LIMIT ?",
                [*params, 50],
            ).fetchall()
        details = " ".join(str(row[-1]) for row in plan)
        assert "USING INDEX memories_category" in details, details
    finally:
        storage.close()
