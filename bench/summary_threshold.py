"""The cosine a summary chunk needs to reach a chat's history, chosen on LoCoMo.

Usage: python bench/summary_threshold.py [--data locomo_dev.json] [--json OUT]

Each development conversation is saved as one chat (both speakers' turns as the user's
messages: the offline summariser reads only the user's) through
:class:`confide.chat.ChatMemory` on SQLite with the local MiniLM embedder, and the rolling
summaries are made as the service makes them (more than 30 unsummarised: the oldest 20,
offline summariser). Each scored question (categories 1-4) is then asked of the history's
summaries tier, and a chunk is *relevant* when its range holds one of the question's
evidence turns; questions whose evidence lies only in the unsummarised tail have no relevant
chunk and are not scored (their count is printed).

The tier shows the best ``3`` chunks at cosine >= T. For each T of the grid a question
scores the F1 of the chunks shown against the relevant ones (0 when none relevant is
shown): showing nothing misses, showing unrelated chunks costs the turn's context. Leave one
conversation out: T is chosen on four conversations (best mean F1 over their questions) and
scored on the fifth; the held-out figures are the honest ones. The shipped default is the T
chosen on all five (a fit, printed beside the folds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine_side import bench_engine
from _locomo_data import DEFAULT_DATA, Dataset, Question, load_conversations
from _loo import folds
from confide.chat import ChatMemory
from confide.chat.summaries import OfflineSummariser
from confide.embedders.local import LocalMiniLMEmbedder
from confide.index.vectors import VectorIndexer
from confide.storage.chat import SqlMessageTables

ACCOUNT = "bench"
SHOWN = 3
GRID = tuple(round(0.05 * i, 2) for i in range(13))  # 0.00 ... 0.60
OLD = 0.8  # the history's semantic threshold, which the chunks had before


@dataclass(frozen=True)
class Asked:
    """One scored question: its chunks' cosines (best first) and which are relevant."""

    question: Question
    scores: tuple[float, ...]
    relevant: tuple[bool, ...]


def shown(asked: Asked, threshold: float, limit: int = SHOWN) -> list[int]:
    """The positions of the chunks the tier shows: the best ``limit`` at ``threshold``."""
    return [i for i, s in enumerate(asked.scores) if s >= threshold][:limit]


def f1(asked: Asked, threshold: float, limit: int = SHOWN) -> float:
    """F1 of the shown chunks against the relevant ones (0 when none relevant is shown)."""
    picked = shown(asked, threshold, limit)
    hits = sum(asked.relevant[i] for i in picked)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(picked), hits / sum(asked.relevant)
    return 2 * precision * recall / (precision + recall)


def found(asked: Asked, threshold: float, limit: int = SHOWN) -> float:
    """1 when a relevant chunk is shown, else 0."""
    return float(any(asked.relevant[i] for i in shown(asked, threshold, limit)))


def ask_all(data: Dataset) -> tuple[list[Asked], int, int]:
    """Save every conversation, summarise it and ask its questions; the scored questions,
    the chunks made and the questions without a relevant chunk."""
    embedder = LocalMiniLMEmbedder()
    out: list[Asked] = []
    chunks = unscored = 0
    with bench_engine("sqlite", prefix="confide-summary-threshold-") as engine:
        engine.add_indexer(VectorIndexer(engine.storage, embedder, link_top_k=0))
        chat = ChatMemory(engine, embedder=embedder, summariser=OfflineSummariser())
        for conv in data.conversations:
            cid = conv.conv_id
            for turn in conv.turns:
                chat.add_message(
                    {
                        "account_id": ACCOUNT,
                        "user_id": cid,
                        "conversation_id": cid,
                        "role": "user",
                        "content": turn.text or "(a photo)",
                    }
                )
            while asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id=cid)):
                pass
            ranges = SqlMessageTables(engine.storage).summaries(ACCOUNT, cid)
            chunks += len(ranges)
            position = {t.dia_id: t.position for t in conv.turns}
            for q in (q for q in data.questions if q.conv_id == cid):
                evidence = [position[e] for e in q.evidence if e in position]
                hits = chat.history.summaries(
                    q.text,
                    account_id=ACCOUNT,
                    user_id=cid,
                    subject=None,
                    minimum=-1.0,
                    limit=len(ranges),
                )
                relevant = tuple(
                    any(
                        int(h.memory.metadata["range_start"])
                        <= p
                        < int(h.memory.metadata["range_end"])
                        for p in evidence
                    )
                    for h in hits
                )
                if not any(relevant):
                    unscored += 1
                    continue
                scores = tuple(float(h.score or 0.0) for h in hits)
                out.append(Asked(q, scores, relevant))
    return out, chunks, unscored


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def report(data: Dataset, asked: Sequence[Asked]) -> dict[str, Any]:
    """The leave-one-conversation-out choice and its held-out figures."""
    scored = Dataset(data.conversations, [a.question for a in asked])
    points = [{"threshold": t} for t in GRID]
    table = [[f1(a, t) for a in asked] for t in GRID]
    fold_list = folds(scored, points, table)
    print(f"{'held out':<10} {'qs':>4}  chosen  train F1  held-out F1  found  shown")
    rows = []
    for fold in fold_list:
        t = fold.chosen["threshold"]
        held = [a for a in asked if a.question.conv_id == fold.held_out]
        hit = _mean([found(a, t) for a in held])
        count = _mean([len(shown(a, t)) for a in held])
        print(
            f"{fold.held_out:<10} {fold.test_questions:>4}  {t:.2f}    {fold.train:.3f}     "
            f"{fold.test:.3f}        {hit:.3f}  {count:.2f}"
        )
        rows.append(
            {
                "held_out": fold.held_out,
                "questions": fold.test_questions,
                "chosen": t,
                "train_f1": round(fold.train, 4),
                "held_out_f1": round(fold.test, 4),
                "held_out_found": round(hit, 4),
                "held_out_shown": round(count, 2),
            }
        )
    chosen_of = {f.held_out: f.chosen["threshold"] for f in fold_list}
    pooled_f1 = _mean([f1(a, chosen_of[a.question.conv_id]) for a in asked])
    pooled_found = _mean([found(a, chosen_of[a.question.conv_id]) for a in asked])
    best = max(range(len(GRID)), key=lambda p: (_mean(table[p]), -p))
    everywhere = GRID[best]

    def line(t: float) -> dict[str, float]:
        return {
            "f1": round(_mean([f1(a, t) for a in asked]), 4),
            "found": round(_mean([found(a, t) for a in asked]), 4),
            "shown": round(_mean([len(shown(a, t)) for a in asked]), 2),
        }

    fit, old, none = line(everywhere), line(OLD), line(-1.0)
    print(
        f"held-out mean of folds F1 {_mean([f.test for f in fold_list]):.3f}, pooled "
        f"{pooled_f1:.3f} (a relevant chunk shown for {pooled_found:.3f} of the questions)"
    )
    print(
        f"chosen on every conversation: {everywhere:.2f} (F1 {fit['f1']:.3f}, found "
        f"{fit['found']:.3f}, {fit['shown']:.2f} shown; a fit, not a held-out figure); "
        f"at {OLD} F1 {old['f1']:.3f}, found {old['found']:.3f}; no threshold F1 "
        f"{none['f1']:.3f}, found {none['found']:.3f}"
    )
    return {
        "grid": list(GRID),
        "folds": rows,
        "mean_of_folds_f1": round(_mean([f.test for f in fold_list]), 4),
        "pooled_held_out": {"f1": round(pooled_f1, 4), "found": round(pooled_found, 4)},
        "chosen_on_all": everywhere,
        "at_chosen": fit,
        f"at_{OLD}": old,
        "no_threshold": none,
    }


def main() -> None:
    """Run the choice and print it (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    data = load_conversations(args.data)
    asked, chunks, unscored = ask_all(data)
    print(
        f"{len(data.conversations)} conversations, {chunks} summary chunks, {len(asked)} "
        f"questions scored ({unscored} with evidence only in the unsummarised tail left out)"
    )
    result = {"bench": "summary_threshold", "chunks": chunks, "questions": len(asked)}
    result |= report(data, asked)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
