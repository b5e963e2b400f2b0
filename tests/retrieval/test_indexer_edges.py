"""The vector indexer keeps an adjacency even when the previous turn is also most similar."""

from __future__ import annotations

from pathlib import Path

from engram.client import Engram
from engram.config import Settings
from engram.crypto.keyring import KeyRing
from engram.engine import MemoryEngine
from engram.storage.sqlite import SqliteStorage
from engram.testing.embedders import HashingEmbedder


def test_adjacent_and_related_edges_to_the_same_turn_both_survive(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "e.db")
    storage.migrate()
    key = bytes(range(32))
    engine = MemoryEngine(
        storage, KeyRing(primary=key), settings=Settings(home=tmp_path, encryption_key=key.hex())
    )
    with Engram(engine, embedder=HashingEmbedder()) as app:
        turn = {"account_id": "a", "user_id": "u", "run_id": "s1", "key": "turn"}
        first = app.engine.store({**turn, "value": "we went camping by the lake"})
        second, third = app.engine.store_many(
            [
                {**turn, "value": "camping by the lake was lovely"},
                {**turn, "value": "lovely camping by the lake again"},
            ]
        )
        kinds = {
            (frozenset((e.from_id, e.to_id)), e.relation_type)
            for e in storage.edges("a", [first.id, second.id, third.id])
        }
    for a, b in ((first, second), (second, third)):
        assert (frozenset((a.id, b.id)), "adjacent") in kinds
    assert (frozenset((first.id, third.id)), "related_to") in kinds
