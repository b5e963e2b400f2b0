"""Lexical recall of LoCoMo questions when the conversation sits among many memories of the
same user, by postings budget.

The lexical search scores at most :attr:`confide.storage.sql.LexicalTuning.postings_budget`
postings (the rarest terms' first). LoCoMo's owners hold a few hundred memories, so no
question there reaches the budget and ``bench/locomo.py`` cannot say what a smaller one costs.
Here each dev conversation's turns are stored for one user (as ``bench/locomo.py`` stores
them) together with ``--others`` more memories of that user: texts joined from the first half
of one turn and the second half of another, both from the *other* conversations (so none
repeats the conversation's evidence), each told by one of the conversation's two speakers on
one of its session dates, as a long-lived user's memories name the same people and days.

Each question is then asked of the lexical search alone, with the blind terms retrieval asks
it with, once per budget: the evidence's recall among the first 40 hits (what ``memory_query``
asks of it for up to ``top_k`` 4) and the first 90 (for ``top_k`` 10), per conversation, and
the search's milliseconds. The candidates the lexical side hands to fusion are what a budget
changes, so their recall bounds what it can cost the ranked answer.

    python bench/lexical_scale.py [--others 100000] [--budgets 10000,5000,3000,2000]
                                  [--whole-terms]

A term that alone has more postings than the budget is scored on a fixed sample of the
budget's size (:attr:`~confide.storage.sql.LexicalTuning.sample_over_budget`);
``--whole-terms`` scores all of its postings instead, as before that rule.

Memories are stored without vectors (the lexical index is written with the memory); one
SQLite store per conversation, removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from _compare import p50_p95
from _engine_side import ACCOUNT, bench_engine, settle, turn_memory
from _locomo_data import DEFAULT_DATA, Conversation, Question, load_conversations
from _progress import counted
from confide.engine import MemoryEngine
from confide.index.tokenize import terms
from confide.retrieval.bm25 import BM25Params
from confide.storage.sql import SqlStorage
from confide.types import MemoryFilter

DEPTHS = (40, 90)
"""Lexical hits ``memory_query`` asks for: ``top_k`` up to 4, and 10."""

BATCH = 1000

Samples = dict[int, dict[str, list[float]]]
"""Per budget: each question's recall at each of :data:`DEPTHS` (``recall@40``...), and
each search's milliseconds (``ms``)."""


def no_samples(budgets: Sequence[int]) -> Samples:
    """Empty :data:`Samples` for ``budgets``."""
    return {b: {**{f"recall@{d}": [] for d in DEPTHS}, "ms": []} for b in budgets}


def other_memories(
    conversation: Conversation, others: Sequence[Conversation], n: int, seed: int
) -> list[dict[str, Any]]:
    """``n`` distinct memories for ``conversation``'s user from the turns of ``others``: the
    first half of one turn's words and the second half of another's, no pair twice, told by
    one of the conversation's speakers on one of its session dates."""
    texts = list(dict.fromkeys(t.text for c in others for t in c.turns if t.text.strip()))
    if n > len(texts) * (len(texts) - 1):
        raise SystemExit(f"at most {len(texts) * (len(texts) - 1)} joined texts from {len(texts)}")
    words = [t.split() for t in texts]
    dates = sorted({t.date for t in conversation.turns})
    rng = random.Random(seed)
    seen: set[tuple[int, int]] = set()
    out: list[dict[str, Any]] = []
    while len(out) < n:
        a, b = rng.randrange(len(texts)), rng.randrange(len(texts))
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        first, second = words[a], words[b]
        value = " ".join(first[: max(1, len(first) // 2)] + second[len(second) // 2 :])
        out.append(
            {
                "account_id": ACCOUNT,
                "user_id": conversation.conv_id,
                "key": f"other_{len(out)}",
                "value": value,
                "type": "episodic",
                "metadata": {
                    "speaker": conversation.speakers[len(out) % 2],
                    "occurred_at": rng.choice(dates).isoformat(),
                },
            }
        )
    return out


def store(engine: MemoryEngine, memories: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Store ``memories`` in batches; the dialogue id of each stored turn by memory id."""
    dia_ids: dict[str, str] = {}
    for start in counted(range(0, len(memories), BATCH), "storing", "batches"):
        for memory in engine.store_many(list(memories[start : start + BATCH])):
            dia_id = memory.metadata.get("dia_id")
            if dia_id is not None:
                dia_ids[memory.id] = str(dia_id)
    return dia_ids


def ask(
    engine: MemoryEngine,
    storage: SqlStorage,
    dia_ids: dict[str, str],
    questions: Sequence[Question],
    budgets: Sequence[int],
    *,
    whole_terms: bool = False,
) -> Samples:
    """Per budget, each question's evidence recall at :data:`DEPTHS` and search time
    (``whole_terms``: a term over the budget scored on all its postings, not a sample)."""
    params = BM25Params()
    original = storage.lexical
    configured = replace(original, sample_over_budget=False) if whole_terms else original
    found = no_samples(budgets)
    try:
        for q in questions:
            flt = MemoryFilter(account_id=ACCOUNT, user_id=q.conv_id)
            tokens = engine.blind_terms(ACCOUNT, terms(q.text))
            # Once untimed: the term counts a search caches serve every budget alike.
            storage.lexical = configured
            storage.lexical_search(flt, tokens, max(DEPTHS), k1=params.k1, b=params.b)
            for budget in budgets:
                storage.lexical = replace(configured, postings_budget=budget)
                start = time.perf_counter()
                hits = storage.lexical_search(flt, tokens, max(DEPTHS), k1=params.k1, b=params.b)
                found[budget]["ms"].append((time.perf_counter() - start) * 1000)
                ranked = [dia_ids.get(h.memory_id) for h in hits]
                for depth in DEPTHS:
                    top = set(ranked[:depth])
                    share = sum(e in top for e in q.evidence) / len(q.evidence)
                    found[budget][f"recall@{depth}"].append(share)
    finally:
        storage.lexical = original
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format file")
    parser.add_argument("--others", type=int, default=100_000, help="other memories per user")
    parser.add_argument("--budgets", default="10000,5000,3000,2000")
    parser.add_argument(
        "--whole-terms",
        action="store_true",
        help="score every posting of a term that alone exceeds the budget (as before "
        "LexicalTuning.sample_over_budget) instead of a fixed sample of the budget's size",
    )
    parser.add_argument("--json", type=Path, default=None, dest="json_out")
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    data = load_conversations(args.data)
    results: dict[str, Any] = {"others": args.others, "conversations": {}}
    print(f"{args.others} other memories per user; budgets {', '.join(map(str, budgets))}")
    header = " ".join(f"{'r@' + str(d) + ' ' + str(b):>12}" for b in budgets for d in DEPTHS)
    print(f"{'conversation':<13} {'qs':>4} {header}")
    pooled = no_samples(budgets)
    for index, conversation in enumerate(data.conversations):
        others = [c for c in data.conversations if c is not conversation]
        questions = [q for q in data.questions if q.conv_id == conversation.conv_id]
        with bench_engine("sqlite", prefix="confide-lexical-scale-") as engine:
            storage = engine.storage
            assert isinstance(storage, SqlStorage)
            memories = [turn_memory(conversation.conv_id, t) for t in conversation.turns]
            memories += other_memories(conversation, others, args.others, seed=index)
            dia_ids = store(engine, memories)
            settle(storage)
            found = ask(engine, storage, dia_ids, questions, budgets, whole_terms=args.whole_terms)
        row: dict[str, Any] = {}
        for budget in budgets:
            for name, values in found[budget].items():
                pooled[budget][name] += values
            row[str(budget)] = {
                **{
                    f"recall@{d}": round(statistics.fmean(found[budget][f"recall@{d}"]), 4)
                    for d in DEPTHS
                },
                "median_ms": round(statistics.median(found[budget]["ms"]), 2),
            }
        results["conversations"][conversation.conv_id] = row
        cells = " ".join(f"{row[str(b)][f'recall@{d}']:>12.3f}" for b in budgets for d in DEPTHS)
        print(f"{conversation.conv_id:<13} {len(questions):>4} {cells}", flush=True)
    cells = " ".join(
        f"{statistics.fmean(pooled[b][f'recall@{d}']):>12.3f}" for b in budgets for d in DEPTHS
    )
    print(f"{'all':<13} {len(pooled[budgets[0]]['ms']):>4} {cells}")
    for budget in budgets:
        p50, p95 = p50_p95(pooled[budget]["ms"])
        results[f"ms_{budget}"] = {"p50": p50, "p95": p95}
        print(f"budget {budget}: lexical search p50 {p50:.2f} ms, p95 {p95:.2f} ms")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(results, indent=2))
        print(f"wrote {args.json_out}")


if __name__ == "__main__":
    main()
