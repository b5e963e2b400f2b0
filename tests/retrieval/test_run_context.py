"""A memory of a run is stored in the context of the previous memory of the same run."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import Embedder
from confide.engine import MemoryEngine
from confide.index.memory_text import indexed_text
from confide.storage import FEATURES
from confide.storage.sqlite import SqliteStorage
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter

KEY = bytes(range(32))


def _app(folder: Path, embedder: Embedder, *, run_context: float = 0.6) -> Confide:
    storage = SqliteStorage(folder / "e.db", features=FEATURES)
    storage.migrate()
    config = Settings(home=folder, encryption_key=KEY.hex(), run_context=run_context)
    return Confide(MemoryEngine(storage, KeyRing(primary=KEY), settings=config), embedder=embedder)


@pytest.fixture
def hashing_app(tmp_path: Path) -> Iterator[Confide]:
    with _app(tmp_path, HashingEmbedder()) as app:
        yield app


def _unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / np.linalg.norm(v), dtype=np.float32)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


SAME = 0.9999
"""Stored vectors come back from SQLite's int8 index: equal up to its rounding."""


def test_each_turn_carries_the_stored_vector_of_the_turn_before(hashing_app: Confide) -> None:
    app = hashing_app
    embedder = HashingEmbedder()
    turn = {"account_id": "a", "user_id": "u", "run_id": "s1", "key": "turn"}
    first = app.engine.store({**turn, "value": "how was the concert on Friday"})
    # The second turn's predecessor is read back from the store, the third's is in its batch.
    second, third = app.engine.store_many(
        [{**turn, "value": "yes I loved it"}, {**turn, "value": "the violins most of all"}]
    )
    alone = app.engine.store({"account_id": "a", "user_id": "u", "key": "k", "value": "porto"})
    stored = app.engine.storage.vectors("a", [first.id, second.id, third.id, alone.id])
    raw = {m.id: embedder.embed_one(indexed_text(m)) for m in (first, second, third, alone)}
    # The first turn of a run, and a memory of no run, are embedded alone.
    assert _cos(stored[first.id], raw[first.id]) > SAME
    assert _cos(stored[alone.id], raw[alone.id]) > SAME
    want_second = _unit(raw[second.id] + 0.6 * stored[first.id])
    assert _cos(stored[second.id], want_second) > SAME
    assert _cos(stored[third.id], _unit(raw[third.id] + 0.6 * want_second)) > SAME
    assert _cos(stored[second.id], raw[second.id]) < 0.99
    assert _cos(stored[third.id], raw[third.id]) < 0.99


def test_a_turn_stored_after_a_batch_follows_its_last_turn(hashing_app: Confide) -> None:
    app = hashing_app
    embedder = HashingEmbedder()
    turn = {"account_id": "a", "user_id": "u", "run_id": "s1", "key": "turn"}
    batch = app.engine.store_many([{**turn, "value": f"turn {i} of the call"} for i in range(12)])
    later = app.engine.store({**turn, "value": "and the last words"})
    stored = app.engine.storage.vectors("a", [batch[-1].id, later.id])
    want = _unit(embedder.embed_one(indexed_text(later)) + 0.6 * stored[batch[-1].id])
    assert _cos(stored[later.id], want) > SAME
    edges = app.engine.storage.edges("a", [later.id])
    assert {(e.from_id, e.to_id) for e in edges if e.relation_type == "adjacent"} == {
        (later.id, batch[-1].id)
    }


def test_run_context_zero_embeds_every_memory_alone(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    with _app(tmp_path, embedder, run_context=0.0) as app:
        turn = {"account_id": "a", "user_id": "u", "run_id": "s1", "key": "turn"}
        made = app.engine.store_many(
            [{**turn, "value": "how was the concert"}, {**turn, "value": "yes I loved it"}]
        )
        stored = app.engine.storage.vectors("a", [m.id for m in made])
        assert all(_cos(stored[m.id], embedder.embed_one(indexed_text(m))) > SAME for m in made)


@pytest.mark.slow
@pytest.mark.parametrize("context", [0.6, 0.0])
def test_a_short_reply_is_found_by_what_it_answers(tmp_path: Path, context: float) -> None:
    """The same reply in three conversations: only its context tells them apart."""
    from confide.embedders.local import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder()
    topics = {
        "concert": "Did you enjoy the Vivaldi concert at the opera house?",
        "dentist": "How did the root canal at the dentist go?",
        "move": "Was packing up the flat for the move exhausting?",
    }
    day = {"occurred_at": "2024-05-08"}
    with _app(tmp_path, embedder, run_context=context) as app:
        replies = {}
        for topic, question in topics.items():
            base = {"account_id": "a", "user_id": "u", "run_id": topic, "key": "turn"}
            _, replies[topic] = app.engine.store_many(
                [
                    {**base, "value": question, "metadata": {"speaker": "Ana", **day}},
                    {**base, "value": "Yes, it really was!", "metadata": {"speaker": "Bea", **day}},
                ]
            )
        query = embedder.embed_one("What did Bea think of the classical music performance?")
        hits = app.engine.storage.vector_search(MemoryFilter(account_id="a", user_id="u"), query, 6)
    score = {h.memory_id: h.score for h in hits}
    concert, others = replies["concert"].id, [replies[t].id for t in ("dentist", "move")]
    if context:
        assert all(score[concert] > score.get(o, -1.0) + 0.02 for o in others)
    else:
        # Stored alone, the three replies are the same text on the same day: no order at all.
        assert all(abs(score.get(o, -1.0) - score[concert]) < 1e-3 for o in others)


@pytest.mark.parametrize("context", [0.6, 0.0])
def test_reindex_stores_turns_in_the_context_it_is_given(tmp_path: Path, context: float) -> None:
    from confide.engine.reindex import reindex

    embedder = HashingEmbedder()
    with _app(tmp_path, embedder) as app:
        turn = {"account_id": "a", "user_id": "u", "run_id": "s1", "key": "turn"}
        made = app.engine.store_many(
            [
                {**turn, "value": "how was the concert"},
                {**turn, "value": "yes I loved it"},
                {**turn, "value": "the violins most of all"},
            ]
        )
        ids = [m.id for m in made]
        before = app.engine.storage.vectors("a", ids)
        reindex(app.engine, embedder, batch_size=64, run_context=context)
        after = app.engine.storage.vectors("a", ids)
    for m in made:
        raw = embedder.embed_one(indexed_text(m))
        if context:
            assert _cos(after[m.id], before[m.id]) > SAME
        else:
            assert _cos(after[m.id], raw) > SAME
    assert (_cos(after[ids[2]], embedder.embed_one(indexed_text(made[2]))) > SAME) == (not context)


def test_reindex_carries_the_context_across_its_batches(tmp_path: Path) -> None:
    from confide.engine.reindex import reindex

    embedder = HashingEmbedder()
    with _app(tmp_path, embedder) as app:
        turn = {"account_id": "a", "user_id": "u", "run_id": "s1", "key": "turn"}
        made = app.engine.store_many([{**turn, "value": f"turn {i} of the call"} for i in range(6)])
        made.append(app.engine.store({**turn, "value": "and the last words"}))
        ids = [m.id for m in made]
        before = app.engine.storage.vectors("a", ids)
        # Batches of two: turns 2, 4 and 6 find their predecessors in earlier batches.
        reindex(app.engine, embedder, batch_size=2)
        after = app.engine.storage.vectors("a", ids)
        edges = app.engine.storage.edges("a", ids)
    assert all(_cos(after[i], before[i]) > SAME for i in ids)
    adjacent = {(e.from_id, e.to_id) for e in edges if e.relation_type == "adjacent"}
    assert adjacent == {(later, earlier) for earlier, later in itertools.pairwise(ids)}
