"""The leave-one-conversation-out choice: picked on the other conversations, scored on one."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _locomo_data import Conversation, Dataset, Question
from _loo import folds, grid_points, pooled


def _data() -> Dataset:
    convs = [Conversation(c, ("A", "B"), []) for c in ("c1", "c2", "c3")]
    questions = [
        Question("c1", "q", 1, ("D1:1",)),
        Question("c2", "q", 1, ("D1:1",)),
        Question("c3", "q", 4, ("D1:1",)),
        Question("c3", "q", 1, ("D1:1",)),
    ]
    return Dataset(convs, questions)


def test_each_fold_is_chosen_without_its_own_questions() -> None:
    data = _data()
    points = [{"w": 0.0}, {"w": 1.0}]
    # Point 1 is best on c1 and c2 and worst on c3; point 0 the other way round.
    recalls = [[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
    got = {f.held_out: f for f in folds(data, points, recalls)}
    assert got["c3"].chosen == {"w": 1.0} and got["c3"].test == 0.0
    assert got["c3"].train == 1.0
    assert got["c3"].test_by_category == {1: 0.0, 4: 0.0}
    # Without c1, point 0 wins on c3's two questions against c2's one.
    assert got["c1"].chosen == {"w": 0.0} and got["c1"].test == 0.0
    assert pooled(data, list(got.values()), points, recalls)["recall@10"] == 0.0


def test_ties_go_to_the_first_point_and_the_grid_starts_with_the_defaults() -> None:
    data = _data()
    got = folds(data, [{"w": 0.0}, {"w": 1.0}], [[0.5] * 4, [0.5] * 4])
    assert all(f.chosen == {"w": 0.0} for f in got)
    first = next(grid_points({"w_dense": (0.5, 0.4), "w_session": (0.0, 0.1)}))
    assert first == {"w_dense": 0.5, "w_session": 0.0}
