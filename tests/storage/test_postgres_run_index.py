"""PostgreSQL: the newest memory of a run stored before another is read through the run index.

The index is partial (``WHERE run_id IS NOT NULL``); the lookup's ``run_id = $n`` implies it,
which the planner has to see for the index to serve the lookup at all.
"""

from __future__ import annotations

import pytest

from confide.storage import FEATURES
from confide.storage.filters import compile_filter
from confide.storage.postgres import PostgresStorage
from confide.testing.postgres import EmbeddedPostgres
from confide.types import MemoryFilter, utcnow


def test_the_previous_turn_is_read_through_the_run_index(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    storage = PostgresStorage(
        postgres_server.temporary_database(request, template="confide_template"),
        max_size=2,
        features=FEATURES,
    )
    try:
        flt = MemoryFilter(
            account_id="acct", user_id="u1", run_id="call-1", created_before=utcnow()
        )
        where, params = compile_filter(flt)
        with storage.transaction() as tx:
            tx.scope_to("acct")
            # An empty table is cheapest to scan; the question is whether the index can serve
            # the statement ``list_memories`` sends, so scans are priced out.
            tx.run("SET LOCAL enable_seqscan = off")
            plan = tx.run(
                f"EXPLAIN SELECT m.id FROM memories m WHERE {where} "
                "ORDER BY m.updated_at DESC, m.id DESC LIMIT ?",
                [*params, 2],
            ).fetchall()
        details = " ".join(str(row[0]) for row in plan)
        assert "memories_run" in details, details
    finally:
        storage.close()
