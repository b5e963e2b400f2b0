"""Leave-one-conversation-out evaluation for ``bench/locomo.py --loo``.

Every tunable ranking parameter, and the store-time ``run_context`` (each value stores the
conversations again), is chosen on four conversations and reported on the fifth,
once per conversation: the held-out figures are what a new user's conversations would see,
the training figures only show how much the choice overfits. Each point of the grid is
ranked once over every question (on the in-memory prototype, which ranks as the engine
does); a fold then picks the point with the best recall@10 over the other conversations'
questions (ties go to the point listed first, the defaults).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from _locomo_data import SCORED_CATEGORIES, Dataset
from _progress import progress_bar
from _prototype import ConfideSide, LinkParams
from confide.retrieval.ranking import RankingWeights

K = 10

# The tunable parameters and the values the search may pick from; the defaults come first.
GRID: dict[str, tuple[float, ...]] = {
    "w_dense": (0.6, 0.5),
    "w_speaker": (0.3, 0.2, 0.1),
    "w_session": (0.0, 0.1, 0.2),
    "w_brief": (0.0, 0.1),
    "w_named": (0.1, 0.0),
    "common_name_share": (0.2, 0.0),
}

# Store-time parameters (``LinkParams``): each value stores the conversations again.
INDEX_GRID: dict[str, tuple[float, ...]] = {
    # Offered 0.3 (and 1.0) as well, every fold chose 0.6 (docs/retrieval.md).
    "run_context": (0.6, 0.0),
}

# ``--sentence-vectors``: the store-time grid that also offers sentence vectors beside the
# turn's (a prototype experiment: the engine does not store them, so they stay out of the
# defaults' grid); ``run_context`` at the 0.6 every fold chose, to keep the grid's size.
SENTENCE_VECTORS: dict[str, tuple[float, ...]] = {"run_context": (0.6,), "part_min_words": (0, 8)}


def grid_points(grid: Mapping[str, Sequence[float]] = GRID) -> Iterator[dict[str, float]]:
    """Every combination of the grid's values, the defaults first."""
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        yield dict(zip(names, values, strict=True))


def question_recalls(side: ConfideSide, data: Dataset, weights: RankingWeights) -> list[float]:
    """Evidence recall@10 of every question of ``data`` (in its order) under ``weights``.

    ``side`` has ingested every conversation already.
    """
    side.weights = weights
    out: list[float] = []
    for q in data.questions:
        top = set(side.query(q.conv_id, q.text, K))
        out.append(sum(e in top for e in q.evidence) / len(q.evidence))
    return out


@dataclass(frozen=True)
class Fold:
    """One held-out conversation: what was chosen without it and how it scored."""

    held_out: str
    chosen: dict[str, float]
    train: float
    test: float
    test_by_category: dict[int, float]
    test_questions: int


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def folds(
    data: Dataset, points: Sequence[dict[str, float]], recalls: Sequence[Sequence[float]]
) -> list[Fold]:
    """For each conversation, the grid point best on the others and its held-out recall."""
    out: list[Fold] = []
    for conv in data.conversations:
        held = [i for i, q in enumerate(data.questions) if q.conv_id == conv.conv_id]
        if not held:
            continue
        held_set = set(held)
        train = [i for i in range(len(data.questions)) if i not in held_set]
        scores = [_mean([r[i] for i in train]) for r in recalls]
        best = max(range(len(points)), key=lambda p: (scores[p], -p))
        chosen = recalls[best]
        by_cat = {
            c: _mean([chosen[i] for i in held if data.questions[i].category == c])
            for c in SCORED_CATEGORIES
            if any(data.questions[i].category == c for i in held)
        }
        out.append(
            Fold(
                held_out=conv.conv_id,
                chosen=points[best],
                train=scores[best],
                test=_mean([chosen[i] for i in held]),
                test_by_category=by_cat,
                test_questions=len(held),
            )
        )
    return out


def pooled(
    data: Dataset,
    fold_list: Sequence[Fold],
    points: Sequence[dict[str, float]],
    recalls: Sequence[Sequence[float]],
) -> dict[str, Any]:
    """Every question scored by its own fold's choice: overall and per category."""
    chosen_of = {f.held_out: points.index(f.chosen) for f in fold_list}
    per_q = [
        (q.category, recalls[chosen_of[q.conv_id]][i])
        for i, q in enumerate(data.questions)
        if q.conv_id in chosen_of
    ]
    return {
        "recall@10": _mean([r for _, r in per_q]),
        "per_category": {
            c: _mean([r for cat, r in per_q if cat == c])
            for c in SCORED_CATEGORIES
            if any(cat == c for cat, _ in per_q)
        },
    }


def _short(point: Mapping[str, float]) -> str:
    return " ".join(f"{k.removeprefix('w_')}={v:g}" for k, v in point.items())


def report(
    data: Dataset,
    stored: Callable[[LinkParams], ConfideSide],
    say: Any,
    index_grid: Mapping[str, Sequence[float]] = INDEX_GRID,
) -> dict[str, Any]:
    """Run the grid, print the per-fold table, the mean and the worst fold; return them.

    ``stored`` gives a side holding every conversation, stored with the given parameters
    (one point of ``index_grid``).
    """
    points: list[dict[str, float]] = []
    recalls: list[list[float]] = []
    total = len(list(grid_points(index_grid))) * len(list(grid_points()))
    with progress_bar("leave-one-out grid", "points") as progress:
        for index_point in grid_points(index_grid):
            side = stored(
                LinkParams(
                    top_k=0,
                    run_context=index_point["run_context"],
                    part_min_words=int(index_point.get("part_min_words", 0)),
                )
            )
            for p in grid_points():
                points.append({**index_point, **p})
                weights = RankingWeights().model_copy(update=p)
                recalls.append(question_recalls(side, data, weights))
                progress(len(points), total)
    fold_list = folds(data, points, recalls)
    cats = " ".join(f"cat{c:<4}" for c in SCORED_CATEGORIES)
    say(
        f"\nleave-one-conversation-out (recall@{K}; {len(points)} grid points over "
        f"{', '.join([*index_grid, *GRID])}, chosen on the other conversations)"
    )
    say(f"{'held out':<10} {'qs':>4}  train  held-out | {cats} | chosen")
    for f in fold_list:
        per = " ".join(
            f"{f.test_by_category[c]:.3f}  " if c in f.test_by_category else "  -    "
            for c in SCORED_CATEGORIES
        )
        say(
            f"{f.held_out:<10} {f.test_questions:>4}  {f.train:.3f}  {f.test:.3f}    | {per}"
            f"| {_short(f.chosen)}"
        )
    tests = [f.test for f in fold_list]
    worst = min(fold_list, key=lambda f: f.test)
    pool = pooled(data, fold_list, points, recalls)
    defaults = recalls[0]
    everywhere = max(range(len(points)), key=lambda p: (_mean(recalls[p]), -p))
    say(
        f"chosen on every conversation (the defaults' rule): {_short(points[everywhere])}, "
        f"recall@{K} {_mean(recalls[everywhere]):.3f} (a fit, not a held-out figure)"
    )
    say(
        f"held-out mean of folds {_mean(tests):.3f}, worst fold {worst.test:.3f} "
        f"({worst.held_out}); pooled over all held-out questions {pool['recall@10']:.3f} ("
        + ", ".join(f"cat{c} {v:.3f}" for c, v in pool["per_category"].items())
        + f"); the defaults on every conversation {_mean(defaults):.3f}"
    )
    return {
        "grid": {**index_grid, **GRID},
        "folds": [
            {
                "held_out": f.held_out,
                "questions": f.test_questions,
                "train_recall@10": round(f.train, 4),
                "held_out_recall@10": round(f.test, 4),
                "held_out_per_category": {
                    str(c): round(v, 4) for c, v in f.test_by_category.items()
                },
                "chosen": f.chosen,
            }
            for f in fold_list
        ],
        "mean_of_folds": round(_mean(tests), 4),
        "worst_fold": round(worst.test, 4),
        "pooled_held_out": {
            "recall@10": round(pool["recall@10"], 4),
            "per_category": {str(c): round(v, 4) for c, v in pool["per_category"].items()},
        },
    }
