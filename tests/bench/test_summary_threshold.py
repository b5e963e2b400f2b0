"""The summaries' cut-off benchmark scores what the tier would show: the best 3 chunks at the
threshold, F1 against the chunks that hold the question's evidence."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _locomo_data import Question
from summary_threshold import Asked, f1, found, shown

QUESTION = Question("c1", "q", 1, ("D1:1",))


def _asked(scores: tuple[float, ...], relevant: tuple[bool, ...]) -> Asked:
    return Asked(QUESTION, scores, relevant)


def test_the_tier_shows_the_best_three_at_the_threshold() -> None:
    asked = _asked((0.6, 0.5, 0.4, 0.3, 0.1), (False, True, False, True, False))
    assert shown(asked, 0.0) == [0, 1, 2]
    assert shown(asked, 0.45) == [0, 1]
    assert shown(asked, 0.7) == []


def test_f1_weighs_a_relevant_chunk_against_what_else_is_shown() -> None:
    asked = _asked((0.6, 0.5, 0.4, 0.3), (False, True, False, False))
    assert f1(asked, 0.0) == 2 * (1 / 3) * 1 / (1 / 3 + 1)  # one of three shown is relevant
    assert f1(asked, 0.45) == 2 * 0.5 * 1 / 1.5
    assert f1(asked, 0.55) == 0.0 and found(asked, 0.55) == 0.0  # only an unrelated one
    assert f1(asked, 0.9) == 0.0  # nothing shown misses
    assert found(asked, 0.0) == 1.0
