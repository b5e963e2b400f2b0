"""The plan SQLite makes for the statement ``list_memories`` sends (the user's own memories)."""

from __future__ import annotations

from confide.storage.filters import compile_filter
from confide.storage.sqlite import SqliteStorage
from confide.types import MemoryFilter


def sqlite_listing_plan(storage: SqliteStorage, flt: MemoryFilter, limit: int) -> str:
    """``EXPLAIN QUERY PLAN`` of the listing of ``flt``'s newest ``limit`` memories, its
    details joined in one line."""
    where, params = compile_filter(flt)
    with storage.transaction() as tx:
        plan = tx.run(
            f"EXPLAIN QUERY PLAN SELECT m.id FROM memories m WHERE {where} "
            "ORDER BY m.updated_at DESC, m.id DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
    return " ".join(str(row[-1]) for row in plan)
