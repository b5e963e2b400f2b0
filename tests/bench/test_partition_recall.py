"""``bench/partition_recall.py``: recall counted as ``bench/scale.py`` counts it, and the
share of lists read chosen on the other conversations only."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from partition_recall import choose_out_of_fold, recall_at


def test_recall_counts_rows_that_reach_the_exact_kth_ties_included() -> None:
    exact = np.array([0.9, 0.8, 0.8, 0.1, 0.05], dtype=np.float32)
    assert recall_at(exact, np.array([0, 2]), 2) == 1.0  # row 2 ties the 2nd
    assert recall_at(exact, np.array([0, 3]), 2) == 0.5


def test_each_fold_picks_the_smallest_share_reaching_the_target_on_the_others() -> None:
    folds = ["a", "a", "b", "b"]
    recalls = {
        0.1: [1.0, 1.0, 0.8, 0.8],  # reaches 0.95 only on a's questions
        0.2: [1.0, 1.0, 1.0, 0.9],
    }
    chosen = {f["held_out"]: f for f in choose_out_of_fold(recalls, folds, 0.95)}
    # Holding a out, b's questions reach 0.95 only at 0.2; holding b out, a's reach it at 0.1.
    assert chosen["a"]["probe_share"] == 0.2 and chosen["a"]["held_out_recall"] == 1.0
    assert chosen["b"]["probe_share"] == 0.1 and chosen["b"]["held_out_recall"] == 0.8
    assert chosen["b"]["train_recall"] == 1.0


def test_a_fold_that_reaches_the_target_nowhere_takes_the_largest_share() -> None:
    recalls = {0.1: [0.5, 0.5], 0.2: [0.6, 0.7]}
    (first, second) = choose_out_of_fold(recalls, ["a", "b"], 0.99)
    assert first["probe_share"] == second["probe_share"] == 0.2
