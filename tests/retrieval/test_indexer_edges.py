"""The vector indexer's edges: adjacency kept beside similarity, the same when pipelined."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders.base import Vectors
from confide.engine import MemoryEngine
from confide.errors import ProviderError
from confide.index import vectors
from confide.storage import FEATURES
from confide.storage.sqlite import SqliteStorage
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter


def test_adjacent_and_related_edges_to_the_same_turn_both_survive(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "e.db", features=FEATURES)
    storage.migrate()
    key = bytes(range(32))
    engine = MemoryEngine(
        storage, KeyRing(primary=key), settings=Settings(home=tmp_path, encryption_key=key.hex())
    )
    with Confide(engine, embedder=HashingEmbedder()) as app:
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


class _CountingEmbedder(HashingEmbedder):
    """Hashing vectors; records each call's batch size, and fails the call ``fail_at``."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.fail_at = fail_at

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise ProviderError("embedder unavailable")
        return super().embed(texts)


def _batch(size: int) -> list[dict[str, str]]:
    words = ("lake", "camping", "garden", "harbour", "kite", "heron")
    return [
        {
            "account_id": "a",
            "user_id": "u",
            "run_id": f"s{i // 5}",
            "key": "turn",
            "value": f"{words[i % 6]} and {words[(i * 5) % 6]} on day {i % 7}",
        }
        for i in range(size)
    ]


def _edges_of(
    tmp_path: Path, name: str, embedder: HashingEmbedder, run_context: float
) -> set[tuple[int, int, str]]:
    """Edges a 40-memory batch gets, as (position, position, kind), after 10 earlier memories."""
    storage = SqliteStorage(tmp_path / f"{name}.db", features=FEATURES)
    storage.migrate()
    key = bytes(range(32))
    settings = Settings(home=tmp_path / name, encryption_key=key.hex(), run_context=run_context)
    engine = MemoryEngine(storage, KeyRing(primary=key), settings=settings)
    with Confide(engine, embedder=embedder) as app:
        items = _batch(50)
        stored = [*app.engine.store_many(items[:10]), *app.engine.store_many(items[10:])]
        position = {m.id: n for n, m in enumerate(stored)}
        return {
            (position[e.from_id], position[e.to_id], e.relation_type)
            for e in storage.edges("a", list(position))
        }


@pytest.mark.parametrize("run_context", [0.0, 0.6])
def test_a_pipelined_batch_gets_the_edges_of_one_embedding_call(
    tmp_path: Path, run_context: float
) -> None:
    # With a run context each vector depends on the one before: the chunks must keep it.
    pipelined = _CountingEmbedder()
    whole = _CountingEmbedder()
    got = _edges_of(tmp_path, "pipelined", pipelined, run_context)
    # A large chunk size embeds the batch in one call, as before pipelining.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "PIPELINE_CHUNK", 1000)
        expected = _edges_of(tmp_path, "whole", whole, run_context)
    assert pipelined.calls[-4:] == [10, 10, 10, 10]
    assert whole.calls[-1] == 40
    assert {kind for *_, kind in expected} == {"adjacent", "related_to"}
    assert got == expected


def test_an_embedder_failure_in_a_later_chunk_stores_nothing(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "e.db", features=FEATURES)
    storage.migrate()
    key = bytes(range(32))
    engine = MemoryEngine(
        storage, KeyRing(primary=key), settings=Settings(home=tmp_path, encryption_key=key.hex())
    )
    embedder = _CountingEmbedder(fail_at=3)
    with Confide(engine, embedder=embedder) as app:
        with pytest.raises(ProviderError):
            app.engine.store_many(_batch(40))
        assert app.engine.list_memories(MemoryFilter(account_id="a", user_id="u")) == []
