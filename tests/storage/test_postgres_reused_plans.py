"""PostgreSQL: statements that reuse one plan read a large owner's rows by the ids in hand.

``run_reusing_plan`` statements are prepared, and PostgreSQL may give them one generic plan
per connection, priced without their values, so for an average owner. In a store of many
one-memory owners and one large owner, those plans must still reach the large owner's rows
by key (never the owner index, never a scan of the table), and no other statement may be
prepared at all.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.storage import FEATURES
from confide.storage.base import EdgeRow
from confide.storage.postgres import PostgresStorage
from confide.storage.sql import SqlExecutor
from confide.testing.builders import ACCOUNT
from confide.testing.embedders import RandomEmbedder, unit_vector
from confide.types import MemoryFilter

DIMS = 16
BIG = "big"
SMALL_OWNERS = 3000

_INDEX_READ = re.compile(r"(?:using|Bitmap Index Scan on) (\w+)")


pytestmark = pytest.mark.parametrize("storage_url", ["postgres"], indirect=True)


@pytest.fixture
def storage(storage_url: str) -> Iterator[PostgresStorage]:
    """The test's database on one pooled connection: every prepared statement is in its
    session."""
    store = PostgresStorage(storage_url, max_size=1, features=FEATURES)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def indexed(engine: MemoryEngine, storage: PostgresStorage) -> Iterator[MemoryEngine]:
    """``engine`` writing vectors (no edges); its events flushed before the store closes."""
    engine.add_indexer(
        VectorIndexer(storage, RandomEmbedder("fake", DIMS), link_top_k=0, link_adjacent=False)
    )
    yield engine
    engine.ops.close()


def _many_small_owners(storage: PostgresStorage, template_id: str) -> None:
    """``SMALL_OWNERS`` owners of one memory each (copies of one row), then statistics."""
    with storage.transaction() as tx:
        tx.across_accounts()
        columns = [
            str(r[0])
            for r in tx.run(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'memories' ORDER BY ordinal_position"
            ).fetchall()
        ]
        copied = {"id": "m.id || '-' || g", "user_id": "'small-' || g"}
        select = ", ".join(copied.get(c, f"m.{c}") for c in columns)
        tx.run(
            f"INSERT INTO memories ({', '.join(columns)}) SELECT {select} FROM memories m "
            "CROSS JOIN generate_series(1, ?) AS g WHERE m.id = ?",
            [SMALL_OWNERS, template_id],
        )
    with storage.reader_across_accounts() as db:
        db.run("ANALYZE")


def _generic_plan(db: SqlExecutor, statement: str) -> str:
    """The plan PostgreSQL makes for ``statement`` (``$n`` placeholders) without values."""
    # Without parameters psycopg sends the text as it is, placeholders and all.
    plan = db.conn.execute("EXPLAIN (GENERIC_PLAN) " + statement)
    return "\n".join(str(row[0]) for row in plan.fetchall())


def test_reused_plans_read_a_large_owners_rows_by_key(
    storage: PostgresStorage, indexed: MemoryEngine
) -> None:
    rng = np.random.default_rng(7)
    stored = indexed.store_many(
        [
            {"account_id": ACCOUNT, "user_id": BIG, "key": f"k{i}", "value": f"walked dog {i}"}
            for i in range(40)
        ]
    )
    vectors = {m.id: unit_vector(rng, DIMS) for m in stored}
    with storage.transaction() as tx:
        tx.put_edges(
            ACCOUNT,
            BIG,
            [EdgeRow(a.id, b.id, "related_to", 0.8) for a, b in itertools.pairwise(stored)],
        )
    _many_small_owners(storage, stored[-1].id)

    flt = MemoryFilter(account_id=ACCOUNT, user_id=BIG)
    tokens = list(indexed.lexical.hashed_terms(ACCOUNT, "walked dog"))
    seeds = [stored[0].id, stored[5].id]
    # Each term alone is over this budget: the search scores a sample of one term's postings.
    sampling = replace(storage.lexical, postings_budget=10)
    for _ in range(6):  # past psycopg's threshold, so plain statements are prepared too
        assert storage.lexical_search(flt, tokens, 3, k1=1.2, b=0.75)
        with pytest.MonkeyPatch.context() as tuned:
            tuned.setattr(storage, "lexical", sampling)
            assert storage.lexical_search(flt, tokens, 3, k1=1.2, b=0.75)
        assert storage.neighbourhood(flt, seeds, vectors[seeds[0]]).rows
        assert storage.neighbourhood(flt, seeds, None, with_vectors=True).rows
        assert storage.edges(ACCOUNT, seeds)
        assert not storage.has_others_shared(flt.model_copy(update={"include_shared": True}))
        assert storage.vector_search(flt, vectors[seeds[0]], 3)
        assert len(storage.filter_memories(flt, seeds)) == len(storage.get_memories(ACCOUNT, seeds))

    with storage.reader_across_accounts() as db:
        prepared = db.run(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()
        assert db.run("SHOW plan_cache_mode").fetchone()[0] == "auto"
        statements = [str(row[0]) for row in prepared]
        # Only run_reusing_plan prepares: the lexical statements (postings with rows, the
        # same on a sample, term counts), both neighbourhood reads, the edges, the shared
        # check and both reads by id. The vector search, run as often, is planned for its
        # values each time.
        assert len(statements) >= 9, prepared
        assert not any("WITH nearest" in s for s in statements), prepared
        assert sum(1 for _, generic, _ in prepared if generic) >= 4, prepared
        for statement in statements:
            plan = _generic_plan(db, statement)
            indexes = set(_INDEX_READ.findall(plan))
            assert "Seq Scan on memories" not in plan, plan
            # The shared check's way in is the partial index of shared rows.
            assert {i for i in indexes if i.startswith("memories_")} <= {
                "memories_pkey",
                "memories_shared",
            }, plan
            # Postings are read by owner and term, never by walking the memory ids.
            assert "memory_tokens_pkey" not in indexes, plan
        sampled = [s for s in statements if "ORDER BY token, memory_id LIMIT" in s]
        assert sampled and all("tokens_owner" in _generic_plan(db, s) for s in sampled)
        # The neighbourhood read as written before it reused plans: its generic plan read
        # the owner's rows by the owner index, which is what the checks above catch.
        joined = next(s for s in statements if "vector_send" in s).replace(
            "CROSS JOIN LATERAL (SELECT * FROM memories WHERE id = o.other OFFSET 0) m",
            "JOIN memories m ON m.id = o.other",
        )
        assert "memories_owner" in _generic_plan(db, joined)
