"""LoCoMo evidence-recall benchmark: Confide's retrieval (and mem0's, when installed).

Every dialogue turn of each conversation is stored as one memory (speaker, text, session
date); every question of categories 1-4 is asked, and evidence recall@5/@10/@20 is reported
overall and per category, with query latency (p50/p95, query embedding included) and the
ingestion rate.

    python bench/locomo.py [--data FILE] [--backend sqlite|postgres] [--json OUT]
                           [--ablation] [--loo [--sentence-vectors]] [--no-mem0] [--cache]

Confide runs on the real engine (``MemoryEngine.store_many`` with the vector indexer,
``retrieve`` over ``StorageCandidateSource``) on ``--backend sqlite`` or an embedded
PostgreSQL under a temporary folder. The bare embedder's batch throughput on the same turns
is measured in the same run, and ingestion is reported as a ratio of it.

``--ablation`` also reports what each ranking component contributes (recall only, on the
in-memory prototype of ``_prototype.py``, which ranks the same way).
``--loo`` chooses every tunable ranking parameter (and the store-time ``run_context``) on
four conversations and reports the fifth, for each conversation in turn (``_loo.py``): the
per-fold table, the mean and the worst fold, and every held-out question pooled.
``--sentence-vectors`` offers the prototype's sentence vectors there too (``part_min_words``
0 or 8, see ``_prototype.LinkParams``; the engine does not store them), with ``run_context``
held at 0.6.
mem0 (``pip install 'confide[bench]'``) runs in the same process on the same embedder object,
``infer=False`` (no LLM), with an embedded Qdrant folder (``_mem0_side.py``); ``--no-mem0``
leaves it out.
``--cache`` keeps turn embeddings under bench/results/ to iterate fast (ingestion rate is
then not meaningful).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine_side import EngineSide
from _locomo_data import (
    DEFAULT_DATA,
    REPO_ROOT,
    SCORED_CATEGORIES,
    DataFormatError,
    Dataset,
    load_conversations,
)
from _loo import INDEX_GRID, SENTENCE_VECTORS
from _loo import report as loo_report
from _mem0_side import make_mem0_side
from _progress import counted, progress_bar
from _prototype import ConfideSide, LinkParams, memory_text
from confide.embedders import CachedEmbedder, Embedder
from confide.embedders.local import PRECISIONS, LocalMiniLMEmbedder
from confide.retrieval.ranking import RankingWeights

KS = (5, 10, 20)
RESULTS = REPO_ROOT / "bench" / "results"


class Side(Protocol):
    """What the harness needs from a memory system."""

    def ingest(self, conv_id: str, turns: Sequence[Any]) -> None: ...

    def query(self, conv_id: str, question: str, k: int) -> list[str]: ...


class DiskCachedEmbedder:
    """Keeps vectors on disk by text digest (bench iteration only)."""

    def __init__(self, inner: Embedder, folder: Path) -> None:
        self.inner = inner
        self.file = folder / f"{inner.model_id}.npz"
        self.model_id = inner.model_id
        self.dims = inner.dims
        self.store: dict[str, np.ndarray] = {}
        if self.file.is_file():
            with np.load(self.file) as data:
                self.store = {k: data[k] for k in data.files}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self.store]
        if todo:
            fresh = self.inner.embed([texts[i] for i in todo])
            for row, i in enumerate(todo):
                self.store[keys[i]] = fresh[row]
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return np.stack([self.store[k] for k in keys])

    def embed_one(self, text: str) -> np.ndarray:
        return self.inner.embed_one(text)

    def flush(self) -> None:
        """Write the vectors to disk."""
        self.file.parent.mkdir(parents=True, exist_ok=True)
        # allow_pickle named (its default), so mypy does not match the arrays against it.
        np.savez(self.file, allow_pickle=True, **self.store)


def evaluate(side: Side, data: Dataset, *, timed: bool = True) -> dict[str, Any]:
    """Ingest every conversation, ask every question, return the metrics."""
    turns = sum(len(c.turns) for c in data.conversations)
    start = time.perf_counter()
    with progress_bar("ingesting", "turns") as progress:
        done = 0
        for conv in data.conversations:
            side.ingest(conv.conv_id, conv.turns)
            done += len(conv.turns)
            progress(done, turns)
    ingest_s = time.perf_counter() - start
    recall: dict[int, list[float]] = {k: [] for k in KS}
    by_cat: dict[int, dict[int, list[float]]] = defaultdict(lambda: {k: [] for k in KS})
    by_conv: dict[str, list[float]] = defaultdict(list)
    latencies: list[float] = []
    for q in counted(data.questions, "asking", "questions"):
        t0 = time.perf_counter()
        found = side.query(q.conv_id, q.text, max(KS))
        latencies.append((time.perf_counter() - t0) * 1000)
        for k in KS:
            top = set(found[:k])
            r = sum(e in top for e in q.evidence) / len(q.evidence)
            recall[k].append(r)
            by_cat[q.category][k].append(r)
            if k == 10:
                by_conv[q.conv_id].append(r)
    cuts = statistics.quantiles(latencies, n=100)
    return {
        **{f"recall@{k}": round(statistics.fmean(recall[k]), 4) for k in KS},
        "per_category": {
            str(c): {f"recall@{k}": round(statistics.fmean(v[k]), 4) for k in KS}
            | {"questions": len(v[10])}
            for c, v in sorted(by_cat.items())
        },
        "p50_ms": round(cuts[49], 2),
        "p95_ms": round(cuts[94], 2),
        "ingest_per_s": round(turns / ingest_s, 1),
        "_per_conversation": {c: round(statistics.fmean(v), 4) for c, v in by_conv.items()},
    }


def embedder_throughput(embedder: Embedder, data: Dataset) -> float:
    """Texts per second of the bare embedder, in the batches ingestion uses (one a session).

    Measured on the two longest conversations (a stable figure in about ten seconds).
    """
    convs = sorted(data.conversations, key=lambda c: -len(c.turns))[:2]
    sessions: dict[tuple[str, int], list[str]] = defaultdict(list)
    for conv in convs:
        for turn in conv.turns:
            sessions[(conv.conv_id, turn.session)].append(memory_text(turn))
    start = time.perf_counter()
    for texts in sessions.values():
        embedder.embed(texts)
    return sum(map(len, sessions.values())) / (time.perf_counter() - start)


class QueryCachedEmbedder:
    """Batches go to ``ingest`` (maybe disk-cached); single queries to an LRU over ``query``."""

    def __init__(self, ingest: Embedder, query: Embedder) -> None:
        self.model_id = query.model_id
        self.dims = query.dims
        self._ingest = ingest
        self._query = CachedEmbedder(query, max_entries=4096)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._ingest.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        return self._query.embed_one(text)


def _row(name: str, m: dict[str, Any]) -> str:
    # A data file may leave a category out: its column shows "-".
    per = m["per_category"]
    cats = " ".join(
        f"{per[str(c)]['recall@10']:.3f}" if str(c) in per else "  -  " for c in SCORED_CATEGORIES
    )
    return (
        f"{name:<22} {m['recall@5']:.3f}  {m['recall@10']:.3f}  {m['recall@20']:.3f}  | {cats} |"
        f" {m['p50_ms']:7.2f} {m['p95_ms']:7.2f} {m['ingest_per_s']:8.1f}"
    )


HEADER = (
    f"{'system':<22} R@5    R@10   R@20   | R@10 cat1..4            |   p50ms   p95ms  ingest/s"
)

# Built up one component at a time, then each default component taken out alone, then the
# components that are off by default added alone. Every row stores turns in the context of
# the previous one (``run_context``, as the defaults do) unless it says otherwise.
_NEW = {"w_named": 0}
_OLD = {"w_speaker": 0, "w_time": 0, "w_adjacent": 0}
# Ablation keys that are store-time parameters (``LinkParams``), not ranking weights.
_STORE_TIME = frozenset({"run_context", "part_min_words"})

ABLATIONS: dict[str, dict[str, float]] = {
    "dense only": {"w_dense": 1.0, **_OLD, **_NEW},
    "bm25 only": {"w_dense": 0.0, **_OLD, **_NEW},
    "hybrid (fusion)": {**_OLD, **_NEW},
    "+ speaker": {"w_time": 0, "w_adjacent": 0, **_NEW},
    "+ time": {"w_adjacent": 0, **_NEW},
    "+ adjacent": {**_NEW},
    "+ named (default)": {},
    "+ brief 0.1 (off)": {"w_brief": 0.1},
    "- speaker": {"w_speaker": 0},
    "- time": {"w_time": 0},
    "- adjacent": {"w_adjacent": 0},
    "- named": {"w_named": 0},
    "- run context": {"run_context": 0.0},
    "- common names": {"common_name_share": 0.0},
    "+ sentence vectors (off)": {"part_min_words": 8},
    "old defaults": {"w_dense": 0.5, "w_speaker": 0.1, **_NEW},
    "+ session 0.1": {"w_session": 0.1},
    "+ diverse 0.03": {"w_diverse": 0.03},
    "+ related 0.1": {"w_related": 0.1},
    "+ entity 0.05": {"w_entity": 0.05},
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--json", type=Path, default=None, dest="json_out")
    parser.add_argument("--ablation", action="store_true")
    parser.add_argument("--loo", action="store_true", help="leave-one-conversation-out")
    parser.add_argument(
        "--sentence-vectors",
        action="store_true",
        help="--loo also offers sentence vectors (prototype only; twice the grid)",
    )
    parser.add_argument("--no-mem0", action="store_true")
    parser.add_argument("--cache", action="store_true")
    parser.add_argument(
        "--precision",
        choices=sorted(PRECISIONS),
        default="int8",
        help="the local MiniLM graph (CONFIDE_EMBEDDER_PRECISION; int8 is the default)",
    )
    args = parser.parse_args(argv)
    lines: list[str] = []
    say = lines.append
    data_path = args.data if args.data.is_absolute() else REPO_ROOT / args.data
    try:
        data = load_conversations(data_path)
    except DataFormatError as exc:
        parser.exit(2, f"locomo.py: error: {exc}\n")
    say(
        f"data: {data_path.name}: {len(data.conversations)} conversations, "
        f"{sum(len(c.turns) for c in data.conversations)} turns, "
        f"{len(data.questions)} scored questions (categories 1-4)"
    )
    say(
        f"evidence ids: {data.evidence_normalised} normalised, {data.evidence_skipped} "
        f"skipped ({', '.join(data.skipped_examples) or 'none'}); "
        f"{data.questions_without_evidence} questions left without evidence were dropped"
    )
    say(f"confide backend: {args.backend} (real engine)")
    local = LocalMiniLMEmbedder(precision=args.precision)
    base: Embedder = DiskCachedEmbedder(local, RESULTS / "embeddings") if args.cache else local
    local.embed_one("warm up")  # model load is not part of the measurement
    bare_per_s = embedder_throughput(local, data)
    say(
        f"embedder: {local.model_id} ({local.precision}) via onnxruntime, "
        f"{bare_per_s:.1f} texts/s bare"
    )
    side = EngineSide(args.backend, QueryCachedEmbedder(base, local))
    try:
        confide = evaluate(side, data)
    finally:
        side.close()
    if isinstance(base, DiskCachedEmbedder):
        base.flush()
    confide["embedder_per_s"] = round(bare_per_s, 1)
    confide["ingest_vs_embedder"] = round(confide["ingest_per_s"] / bare_per_s, 3)
    confide["backend"] = args.backend
    say(
        f"ingestion {confide['ingest_per_s']:.1f}/s = {confide['ingest_vs_embedder']:.2f} of the "
        "bare embedder's batch throughput"
    )
    mem0: dict[str, Any] | None = None
    if not args.no_mem0:
        # The same model, caches and texts as Confide's side: only the memory systems differ.
        mem0_side = make_mem0_side(QueryCachedEmbedder(base, local))
        if mem0_side is None:
            say("mem0: not installed (pip install 'confide[bench]'), skipped")
        else:
            say(f"mem0: {mem0_side.setup}")
            try:
                mem0 = evaluate(mem0_side, data)
            finally:
                mem0_side.close()
            mem0["setup"] = mem0_side.setup
    say("")
    say(HEADER)
    say(_row("confide", confide))
    if mem0 is not None:
        say(_row("mem0 (infer=False)", mem0))
        ratio = {
            k: confide[k] / mem0[k] if mem0[k] else float("nan")
            for k in ("recall@5", "recall@10", "recall@20", "p50_ms", "p95_ms", "ingest_per_s")
        }
        say("confide/mem0 ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()))
    say(
        "confide recall@10 per conversation: "
        + ", ".join(f"{c} {v:.3f}" for c, v in confide["_per_conversation"].items())
    )
    if args.ablation:
        say("\nablation (confide, recall only; timings include cached embeddings)")
        say(HEADER)
        embedder = CachedEmbedder(local, max_entries=4096)
        for name, change in ABLATIONS.items():
            weights = RankingWeights().model_copy(
                update={k: v for k, v in change.items() if k not in _STORE_TIME}
            )
            links = LinkParams(top_k=5 if weights.w_related else 0)
            if "run_context" in change:
                links = replace(links, run_context=change["run_context"])
            if "part_min_words" in change:
                links = replace(links, part_min_words=int(change["part_min_words"]))
            proto = ConfideSide(
                embedder, weights=weights, links=links, ingest_embedder=base, part_embedder=local
            )
            say(_row(name, evaluate(proto, data)))
    loo: dict[str, Any] | None = None
    if args.loo:
        query_embedder = CachedEmbedder(local, max_entries=4096)

        def stored(links: LinkParams) -> ConfideSide:
            side = ConfideSide(
                query_embedder, links=links, ingest_embedder=base, part_embedder=local
            )
            for conv in data.conversations:
                side.ingest(conv.conv_id, conv.turns)
            return side

        grid = SENTENCE_VECTORS if args.sentence_vectors else INDEX_GRID
        loo = loo_report(data, stored, say, grid)
    # The figures are on disk before anything is printed (a broken pipe loses no result).
    if args.json_out is not None:
        out = {
            "confide": {k: v for k, v in confide.items() if not k.startswith("_")},
            "mem0": None
            if mem0 is None
            else {k: v for k, v in mem0.items() if not k.startswith("_")},
            "loo": loo,
        }
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        say(f"\nwrote {args.json_out}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
