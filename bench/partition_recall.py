"""ANN recall of the SQLite vector index's partitioned search on distinct real vectors.

    PYTHONPATH=src python bench/partition_recall.py [--rows 100000] \\
        [--probe-shares 0.05,0.075,0.1,0.15,0.2] [--target 0.97] [--json OUT]

``bench/scale.py`` fills its large sizes from a pool of 5,000 vectors plus noise, so a
partition learnt on that fill finds the pool's clusters: its ``ann_recall@10`` says little of
how the lists would split real memories. Here every row is a distinct LoCoMo text (every turn
once, then halves of two turns joined, as ``bench/scale.py`` draws them), embedded once with
the local MiniLM and cached under bench/results/; the questions are LoCoMo's.

For the full pass over every row's sign bits and for each share of the lists read, it prints
the share of rows whose bits are read and ``ann_recall@10``: the share of the index's top 10
(the same shortlist and int8 re-scoring as ``SqliteVectorIndex.search``) whose exact float
cosine reaches the exact 10th, as ``bench/scale.py`` counts it.

The share of lists read is a tunable, so it is also chosen leave-one-conversation-out: for
each conversation, the smallest share whose recall over the other conversations' questions
reaches ``--target``, reported on that conversation's own questions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import scale
from _locomo_data import DEFAULT_DATA, load_conversations
from _progress import counted
from confide.embedders.local import LocalMiniLMEmbedder
from confide.storage.sqlite_vectors import (
    SqliteVectorIndex,
    _OwnerIndex,
    _ranked,
    nearest_by_bits,
    pack_signs,
)
from confide.storage.vector_partition import Partition, build_partition, list_count


def recall_at(exact: np.ndarray, found: np.ndarray, k: int) -> float:
    """Share of ``found`` (rows) whose exact cosine reaches the exact ``k``-th."""
    kth = float(np.partition(exact, -k)[-k])
    return sum(1 for r in found.tolist() if float(exact[r]) >= kth - 1e-6) / k


def searched(
    index: SqliteVectorIndex,
    owner: _OwnerIndex,
    partition: Partition | None,
    q: np.ndarray,
    k: int,
) -> np.ndarray:
    """The top ``k`` rows as the index's search ranks them (no filter)."""
    shortlist = index.shortlist_for(len(owner.ids), k)
    if partition is None:
        rows = nearest_by_bits(owner.bits, pack_signs(q[None, :])[0], shortlist)
    else:
        rows = index._nearest_in_partition(owner, partition, q, shortlist)
    ranked, _, _ = _ranked(owner, q, rows, head=k)
    return ranked[:k]


def choose_out_of_fold(
    recalls: dict[float, list[float]], folds: list[str], target: float
) -> list[dict[str, Any]]:
    """Per conversation: the smallest share reaching ``target`` on the others' questions
    (the largest offered if none does), and its recall on this conversation's questions."""
    shares = sorted(recalls)
    out = []
    for held in sorted(set(folds)):
        inside = [i for i, f in enumerate(folds) if f != held]
        outside = [i for i, f in enumerate(folds) if f == held]

        def mean(share: float, rows: list[int]) -> float:
            return statistics.fmean(recalls[share][i] for i in rows)

        chosen = next((s for s in shares if mean(s, inside) >= target), shares[-1])
        out.append(
            {
                "held_out": held,
                "questions": len(outside),
                "probe_share": chosen,
                "train_recall": round(mean(chosen, inside), 4),
                "held_out_recall": round(mean(chosen, outside), 4),
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--probe-shares", default="0.05,0.075,0.1,0.15,0.2")
    parser.add_argument("--target", type=float, default=0.97)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format file")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    shares = sorted(float(s) for s in args.probe_shares.split(","))

    scale.use_locomo_text(args.data)
    data = load_conversations(args.data)
    asked = list({q.text: q.conv_id for q in data.questions}.items())
    local = LocalMiniLMEmbedder()
    vectors = scale.pool_vectors(local, scale.sentences(args.rows, seed=1)).astype(np.float32)
    owner = _OwnerIndex()
    owner.append([f"m{i}" for i in range(len(vectors))], vectors)
    started = time.perf_counter()
    partition = build_partition(owner.codes, owner.scales, owner.bits, lists=list_count(args.rows))
    built_s = time.perf_counter() - started
    index = SqliteVectorIndex()
    questions = np.vstack(
        [local.embed_one(text) for text, _ in counted(asked, "embedding", "questions")]
    )
    exact = [vectors @ q for q in questions]

    def recalls(part: Partition | None) -> list[float]:
        return [
            recall_at(e, searched(index, owner, part, q, args.k), args.k)
            for q, e in zip(questions, exact, strict=True)
        ]

    full = recalls(None)
    by_share: dict[float, list[float]] = {}
    read: dict[float, float] = {}
    probes: dict[float, int] = {}
    for share in shares:
        index.probe_share = share
        probes[share] = index.probes_for(partition)
        by_share[share] = recalls(partition)
        sizes = [
            int(partition.starts[c + 1] - partition.starts[c])
            for q in questions
            for c in partition.nearest_lists(q, probes[share])
        ]
        read[share] = sum(sizes) / len(questions) / args.rows
    folds = choose_out_of_fold(by_share, [conv for _, conv in asked], args.target)
    result = {
        "rows": args.rows,
        "lists": partition.lists,
        "build_s": round(built_s, 2),
        "questions": len(asked),
        "shortlist": index.shortlist_for(args.rows, args.k),
        "full_pass_recall": round(statistics.fmean(full), 4),
        "partitioned": [
            {
                "probe_share": s,
                "probes": probes[s],
                "rows_read_share": round(read[s], 4),
                "recall": round(statistics.fmean(by_share[s]), 4),
            }
            for s in shares
        ],
        "leave_one_conversation_out": folds,
        "held_out_recall_mean": round(statistics.fmean(f["held_out_recall"] for f in folds), 4),
    }
    print(
        f"{args.rows} distinct rows, {partition.lists} lists (built in {built_s:.1f} s), "
        f"{len(asked)} questions, shortlist {result['shortlist']}"
    )
    print(f"full pass: ann_recall@{args.k} {result['full_pass_recall']:.4f}")
    for row in result["partitioned"]:
        print(
            f"lists read {row['probe_share']:.3f} ({row['probes']}): rows read "
            f"{row['rows_read_share']:.3f}, ann_recall@{args.k} {row['recall']:.4f}"
        )
    for f in folds:
        print(
            f"held out {f['held_out']} ({f['questions']} questions): share {f['probe_share']}, "
            f"train {f['train_recall']:.4f}, held out {f['held_out_recall']:.4f}"
        )
    print(f"held-out mean: {result['held_out_recall_mean']:.4f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
