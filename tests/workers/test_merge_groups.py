"""How judged pairs become merge groups: same-fact pairs join, a different-facts verdict
between two groups keeps them apart, and every group stands on its own."""

from __future__ import annotations

from confide.testing.builders import unstored_memory
from confide.workers.consolidation import fingerprint, merge_groups
from confide.workers.judges import Pair, Verdict


def _pair(a: int, b: int, score: float) -> Pair:
    return Pair(unstored_memory(a, f"value {a}"), unstored_memory(b, f"value {b}"), score)


def test_several_groups_form_side_by_side() -> None:
    same = Verdict(True, "similar")
    decided = [
        (_pair(1, 2, 0.9), same),
        (_pair(3, 4, 0.95), same),
        (_pair(5, 6, 0.8), same),
        (_pair(2, 7, 0.85), Verdict(True, "llm", "Worded once")),
    ]
    groups = {
        frozenset(m.id for m in members): (best, worded)
        for members, best, worded in merge_groups(decided)
    }
    assert groups == {
        frozenset({"m1", "m2", "m7"}): (0.9, None),
        frozenset({"m3", "m4"}): (0.95, None),
        frozenset({"m5", "m6"}): (0.8, None),
    }


def test_a_different_verdict_keeps_groups_apart() -> None:
    same, apart = Verdict(True, "similar"), Verdict(False, "numbers")
    decided = [
        (_pair(1, 2, 0.95), same),
        (_pair(3, 4, 0.94), same),
        (_pair(2, 3, 0.9), same),  # would chain 1-2 with 3-4 ...
        (_pair(1, 4, 0.7), apart),  # ... but 1 and 4 are different facts
    ]
    groups = sorted(sorted(m.id for m in members) for members, _, _ in merge_groups(decided))
    assert groups == [["m1", "m2"], ["m3", "m4"]]


def test_fingerprints_ignore_order_and_see_the_rounded_score() -> None:
    assert fingerprint("a", "b", 0.912) == fingerprint("b", "a", 0.908)
    assert fingerprint("a", "b", 0.91) != fingerprint("a", "b", 0.92)
    stored = fingerprint("memory-one", "memory-two", 0.5)
    assert "memory" not in stored and len(stored) == 64  # a digest: no id in clear
