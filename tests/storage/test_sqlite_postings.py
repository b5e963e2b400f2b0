"""SQLite's posting lists held in process: the same answers as the database's sum, term rows
kept in step with every write, and a bounded cache."""

from __future__ import annotations

import random
from typing import Any

import pytest

from confide.engine import MemoryEngine
from confide.storage.base import Storage
from confide.storage.sql import SqlStorage
from confide.storage.sqlite import SqliteStorage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import unrecord_steps
from confide.types import MemoryFilter

pytestmark = pytest.mark.parametrize("storage_url", ["sqlite"], indirect=True)

WORDS = [f"w{i}" for i in range(40)]


def _sqlite(storage: Storage) -> SqliteStorage:
    assert isinstance(storage, SqliteStorage)
    return storage


def _crowd(engine: MemoryEngine, n: int, seed: int) -> None:
    """``n`` memories of a few words each (some repeated, some texts twice: tied scores),
    every tenth in category ``rare``."""
    rng = random.Random(seed)
    texts = [
        " ".join(rng.choices(WORDS[: rng.randint(3, 40)], k=rng.randint(1, 9))) for _ in range(n)
    ]
    texts += texts[:10]
    engine.store_many(
        [
            {
                "account_id": ACCOUNT,
                "user_id": "user-1",
                "key": f"k{i}",
                "value": text,
                "category": "rare" if i % 10 == 0 else "fact",
            }
            for i, text in enumerate(texts)
        ]
    )


def _search(storage: SqliteStorage, engine: MemoryEngine, text: str, k: int, **flt: Any) -> Any:
    tokens = list(engine.lexical.hashed_terms(ACCOUNT, text))
    scope = MemoryFilter(account_id=ACCOUNT, user_id="user-1", **flt)
    return [
        (h.memory_id, round(h.score, 9))
        for h in storage.lexical_search(scope, tokens, k, k1=1.2, b=0.75)
    ]


def _in_database(storage: SqliteStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Score postings with the database's ``GROUP BY``, as the shared SQL path does."""
    monkeypatch.setattr(
        storage,
        "_owner_postings",
        lambda db, flt, scoring, k: SqlStorage._owner_postings(storage, db, flt, scoring, k),
    )


def _term_rows(storage: SqliteStorage) -> tuple[list[Any], list[Any]]:
    """``token_terms`` and the counts it should hold, both sorted."""
    with storage._reader(ACCOUNT) as db:
        kept = db.run(
            "SELECT account_id, user_id, token, postings FROM token_terms ORDER BY 1, 2, 3"
        ).fetchall()
        counted = db.run(
            "SELECT account_id, user_id, token, COUNT(*) FROM memory_tokens "
            "GROUP BY account_id, user_id, token ORDER BY 1, 2, 3"
        ).fetchall()
    return [tuple(r) for r in kept], [tuple(r) for r in counted]


@pytest.mark.parametrize("budget", [2_000_000, 60])
def test_postings_added_up_in_process_rank_as_the_database_does(
    engine: MemoryEngine, storage: Storage, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    sqlite = _sqlite(storage)
    sqlite.postings.max_postings = budget
    _crowd(engine, 300, seed=5)
    questions = ["w1 w2", "w0", "w3 w17 w39", "w5 w5 w6 w7 w8", "w30 nothing"]
    asked = [
        (q, k, flt) for q in questions for k in (3, 40) for flt in ({}, {"categories": ("rare",)})
    ]
    held = [_search(sqlite, engine, q, k, **flt) for q, k, flt in asked]
    held_again = [_search(sqlite, engine, q, k, **flt) for q, k, flt in asked]
    assert sqlite.postings.postings_held <= budget
    _in_database(sqlite, monkeypatch)
    summed = [_search(sqlite, engine, q, k, **flt) for q, k, flt in asked]
    assert held == held_again == summed
    assert any(len(hits) == 40 for hits in summed)  # the crowd fills the deep searches
    # and the category leaves fewer than the best postings hold (the database's join then)
    assert any(0 < len(hits) < 40 for hits in summed[1::2])


def test_term_rows_count_postings_through_every_kind_of_write_and_erasure(
    engine: MemoryEngine, storage: Storage
) -> None:
    sqlite = _sqlite(storage)
    _crowd(engine, 50, seed=6)
    add(engine, key="other", value="w1 w2 w3", user_id="user-2")
    memories = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
    engine.update(memories[0].id, {"value": "w4 rewritten"}, account_id=ACCOUNT)
    engine.forget(memories[1].id, account_id=ACCOUNT)
    with sqlite.transaction() as tx:
        tx.put_tokens(memories[2].id, ACCOUNT, "user-1", {123: 2, 456: 1})
        tx.delete_memories([memories[3].id])
    kept, counted = _term_rows(sqlite)
    assert kept == counted and len(kept) > 40
    assert _search(sqlite, engine, "w1 w2 w4", 10)
    assert sqlite.postings.postings_held > 0
    engine.erase_user(account_id=ACCOUNT, user_id="user-1")
    assert sqlite.postings.postings_held == 0  # this process forgets the erased lists
    kept, counted = _term_rows(sqlite)
    assert kept == counted
    assert {(r[0], r[1]) for r in kept} == {(ACCOUNT, "user-2")}


def test_an_older_store_gets_its_term_rows_counted(engine: MemoryEngine, storage: Storage) -> None:
    sqlite = _sqlite(storage)
    _crowd(engine, 40, seed=7)
    expected = _search(sqlite, engine, "w1 w2", 10)
    with sqlite.transaction() as tx:
        tx.run("DROP TRIGGER token_posted")
        tx.run("DROP TRIGGER token_unposted")
        tx.run("DELETE FROM token_terms")
    unrecord_steps(sqlite, "memories", version=16)
    sqlite.migrate()
    kept, counted = _term_rows(sqlite)
    assert kept == counted and kept
    sqlite.postings.clear()
    assert _search(sqlite, engine, "w1 w2", 10) == expected
    add(engine, key="new", value="w1 w2 w1 w2")
    assert _term_rows(sqlite)[0] == _term_rows(sqlite)[1]


def test_memory_ids_of_several_widths_rank_as_the_database_ranks_them(
    engine: MemoryEngine, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqlite = _sqlite(storage)
    _crowd(engine, 60, seed=8)
    conn = sqlite._connection()
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        for i, (memory_id,) in enumerate(conn.execute("SELECT id FROM memories").fetchall()):
            if i % 3 == 0:  # ids imported from elsewhere: shorter, and sorting otherwise
                for table, column in (("memories", "id"), ("memory_tokens", "memory_id")):
                    conn.execute(
                        f"UPDATE {table} SET {column} = ? WHERE {column} = ?",
                        [f"z{i}", memory_id],
                    )
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
    asked = ["w1 w2", "w0", "w3 w17 w39"]
    held = [_search(sqlite, engine, q, 40) for q in asked]
    assert any(m.startswith("z") for hits in held for m, _ in hits)
    _in_database(sqlite, monkeypatch)
    assert held == [_search(sqlite, engine, q, 40) for q in asked]
