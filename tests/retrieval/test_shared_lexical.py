"""Keyword retrieval (no embedder) finds other users' shared memories by words the asker
never used: the shared half of a search is weighed over the memories it may return."""

from __future__ import annotations

from typing import Any

from engram.client import Engram
from engram.engine import MemoryEngine

ACCOUNT = "acct-shared"


def _store(engine: MemoryEngine, user: str, key: str, value: str, **fields: Any) -> str:
    memory = engine.store(
        {"account_id": ACCOUNT, "user_id": user, "key": key, "value": value, **fields}
    )
    return memory.id


def _found(app: Engram, user: str, query: str) -> set[str]:
    result = app.query(
        {"agent": "default", "account_id": ACCOUNT, "user_id": user, "query": query, "top_k": 10}
    )
    return {r["id"] for r in result.results}


def test_an_asker_without_memories_finds_a_shared_one(engine: MemoryEngine) -> None:
    app = Engram(engine, embedder=None)
    shared = _store(
        engine, "u2", "note", "The okapi sanctuary opens in March.", visibility="shared"
    )
    _store(engine, "u2", "note", "The okapi vet visits on Fridays.")  # private
    assert _found(app, "u1", "okapi sanctuary") == {shared}


def test_an_asker_with_other_words_finds_a_shared_one(engine: MemoryEngine) -> None:
    app = Engram(engine, embedder=None)
    own = _store(engine, "u1", "note", "Lunch with Dana at the harbour on Sunday.")
    shared = _store(
        engine, "u2", "note", "The okapi sanctuary opens in March.", visibility="shared"
    )
    private = _store(engine, "u3", "note", "An okapi sanctuary donation is planned.")
    found = _found(app, "u1", "okapi sanctuary")
    assert shared in found
    assert private not in found
    assert own not in found
    # The asker's own memories are still found by their own words.
    assert _found(app, "u1", "harbour lunch") == {own}
