"""The prototype's sentence vectors: found by the turn's vector, scored by the best of both."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _locomo_data import Turn
from _prototype import InMemorySource, LinkParams


def _turn(i: int) -> Turn:
    return Turn("c", f"D1:{i}", 1, i, "A", f"turn {i}", None, datetime(2023, 5, 8), "")


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_sentence_vector_raises_its_turns_score_but_does_not_find_it() -> None:
    source = InMemorySource(LinkParams(top_k=0, run_context=0.0))
    vectors = np.stack([_unit(1, 0, 0), _unit(0, 1, 0), _unit(0, 0, 1)])
    # Turn 2 holds a sentence that is exactly the query; turn 0 none.
    parts = [np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), _unit(1, 1, 0)[None]]
    source.add([_turn(i) for i in range(3)], vectors, parts)
    query = _unit(1, 1, 0)
    found = source.dense_candidates(query, limit=2)
    # Chosen by the turns' own vectors (0 and 1 tie ahead of 2) ...
    assert sorted(c.id for c in found) == ["0", "1"]
    # ... while a candidate read another way is scored with its sentence.
    scored = {c.id: c.dense for c in source.with_dense([source._candidate(2)], query)}
    assert scored["2"] is not None and abs(scored["2"] - 1.0) < 1e-6
    assert all(
        c.dense is not None and abs(c.dense - float(query @ vectors[int(c.id)])) < 1e-6
        for c in found
    )
