"""Daily consolidation with the offline same-fact judge and the real local MiniLM embedder.

    python bench/consolidation.py [--size 100000] [--pool 2000] [--pass-candidates 2000]
                                  [--backend sqlite|postgres] [--json OUT]

Four parts, each printed:

1. **Threshold** of the offline judge, chosen on half of the labelled pairs in
   ``bench/data/consolidation_pairs.jsonl`` (different facts that differ in one detail, and
   paraphrases of one fact): the even positions of each label are the dev half, the odd ones
   are held out. The cosine the judge needs is the lowest on a 0.01 grid that merges no
   different facts of the dev half, plus a margin of 0.05; merges between different facts
   and the share of paraphrase pairs merged are printed for both halves and for two more
   held-out sets: ``consolidation_pairs_heldout2.jsonl`` (written before the word lists
   were last revised; the judge's word alignment was then designed on it together with the
   two halves, so it is no longer unseen) and ``consolidation_pairs_heldout3.jsonl``
   (written before the word alignment, and never used to design or tune it).
2. **15 paraphrased inserts of 5 facts** (``bench/data/consolidation_paraphrases.jsonl``,
   keys as an agent might write them) stored as written, then one daily run: the active
   memories left (goal 5).
3. **LLM calls and tokens per user per day**: none with the offline judge; for the LLM judge,
   its prompts measured against the scripted server (4 characters a token, as the usage
   ledger counts): for the paraphrase user's pairs and for a day at the cap (50 pairs).
4. **Throughput** on ``--size`` memories of one user (distinct template facts, one store):
   the daily run as configured (every memory is a candidate, as all changed today; it stops
   at the day's 50 pairs), then a pass with the cap lifted over ``--pass-candidates``
   candidates: memories consolidated (examined, paired, judged, merged) per second. Rows
   beyond ``--pool`` reuse one of ``--pool`` real MiniLM vectors with a little noise of their
   own (``--pool 0`` embeds every row; slow on a small machine), as ``bench/scale.py`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine_side import bench_storage, settle
from _progress import progress_bar
from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import Embedder
from confide.embedders.local import LocalMiniLMEmbedder
from confide.engine import MemoryEngine
from confide.llm import OpenAICompatibleLLM
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.storage import FEATURES
from confide.storage.apps import SqlAppTables
from confide.storage.base import Storage
from confide.testing.builders import read_jsonl, unstored_memory
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.types import MemoryFilter
from confide.workers.consolidation import ConsolidationReport, Consolidator
from confide.workers.judges import LLMJudge, OfflineJudge, Pair
from scale import PoolEmbedder, pool_vectors

DATA = Path(__file__).resolve().parent / "data"
PAIRS = DATA / "consolidation_pairs.jsonl"
PAIRS_SECOND = DATA / "consolidation_pairs_heldout2.jsonl"
PAIRS_FRESH = DATA / "consolidation_pairs_heldout3.jsonl"
PARAPHRASES = DATA / "consolidation_paraphrases.jsonl"
ACCOUNT = "consolidation"
GRID = [round(0.5 + 0.01 * i, 2) for i in range(50)]


# ---- 1. threshold --------------------------------------------------------------------------
def split_pairs(
    rows: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(dev, held out): even and odd positions within each label."""
    dev: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for label in (False, True):
        for position, row in enumerate(r for r in rows if r["same"] is label):
            (dev if position % 2 == 0 else held).append(row)
    return dev, held


def scores(rows: Sequence[dict[str, Any]], embedder: Embedder, threshold: float) -> dict[str, Any]:
    """Merges of different facts and share of paraphrases merged at ``threshold``."""
    judge = OfflineJudge(embedder, same_cosine=threshold, same_key_cosine=threshold)
    pairs = [_pair(r) for r in rows]
    cosines = judge.cosines(pairs)
    merged = [judge.decide(p, c).same for p, c in zip(pairs, cosines, strict=True)]
    different = [m for m, r in zip(merged, rows, strict=True) if not r["same"]]
    same = [m for m, r in zip(merged, rows, strict=True) if r["same"]]
    return {
        "different_pairs": len(different),
        "false_merges": sum(different),
        "same_pairs": len(same),
        "same_merged": sum(same),
        "recall": round(sum(same) / max(1, len(same)), 3),
    }


MARGIN = 0.05
"""Added to the lowest safe cosine on the dev half, so the held-out half is not judged at the
dev half's edge."""


def choose_threshold(dev: Sequence[dict[str, Any]], embedder: Embedder) -> float:
    """The lowest cosine on the grid that merges no different facts of ``dev``, plus
    :data:`MARGIN`."""
    judge = OfflineJudge(embedder, same_cosine=0.0, same_key_cosine=0.0)
    pairs = [_pair(r) for r in dev]
    cosines = judge.cosines(pairs)
    # A pair nothing sets apart (no blocking word, number or order) is merged on its cosine.
    open_pairs = [judge.decide(p, 1.0).same for p in pairs]
    for threshold in GRID:
        if not any(
            not r["same"] and unblocked and c >= threshold
            for r, c, unblocked in zip(dev, cosines, open_pairs, strict=True)
        ):
            return round(min(0.99, threshold + MARGIN), 2)
    return 0.99


def _pair(row: dict[str, Any]) -> Pair:
    """A labelled row's two values as a pair of memories of one user."""
    first = unstored_memory(0, row["a"], account_id=ACCOUNT, user_id="labelled")
    second = unstored_memory(1, row["b"], account_id=ACCOUNT, user_id="labelled")
    return Pair(first, second, 1.0)


# ---- engines ---------------------------------------------------------------------------------
def open_confide(storage: Storage, embedder: Embedder, folder: Path) -> Confide:
    settings = Settings(home=folder / "home", encryption_key=os.urandom(32).hex(), link_top_k=0)
    engine = MemoryEngine(storage, KeyRing(primary=os.urandom(32)), settings=settings)
    return Confide(engine, embedder=embedder, settings=settings)


def consolidate(
    engine: MemoryEngine,
    judge: Any,
    user: str,
    *,
    max_candidates: int | None = None,
    **changes: Any,
) -> ConsolidationReport:
    settings = engine.settings.model_copy(update=changes)
    consolidator = Consolidator(engine, judge, settings, max_candidates=max_candidates)
    return asyncio.run(consolidator.run_user(account_id=ACCOUNT, user_id=user))


# ---- 2. paraphrases ----------------------------------------------------------------------------
def paraphrases(
    backend: str, embedder: Embedder, threshold: float
) -> tuple[int, ConsolidationReport, list[Pair]]:
    rows = read_jsonl(PARAPHRASES)
    with (
        tempfile.TemporaryDirectory(prefix="confide-consolidation-") as tmp,
        bench_storage(backend, Path(tmp)) as storage,
    ):
        app = open_confide(storage, embedder, Path(tmp))
        engine = app.engine
        for row in rows:  # one at a time, as a conversation would store them
            engine.store(
                {"account_id": ACCOUNT, "user_id": "para", "key": row["key"], "value": row["value"]}
            )
        judge = OfflineJudge(embedder, same_cosine=threshold, same_key_cosine=threshold)
        seen: list[Pair] = []

        class Recording(OfflineJudge):
            async def judge(self, pairs: Sequence[Pair], **kw: Any) -> Any:
                seen.extend(pairs)
                return await super().judge(pairs, **kw)

        recording = Recording(
            embedder, same_cosine=judge.same_cosine, same_key_cosine=judge.same_key_cosine
        )
        report = consolidate(engine, recording, "para")
        left = len(engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="para")))
        app.access.close()
    return left, report, seen


# ---- 3. LLM judge estimate -------------------------------------------------------------------
def llm_estimate(pairs: Sequence[Pair], folder: Path) -> dict[str, int]:
    """Calls and tokens the LLM judge spends on ``pairs``, counted by the usage ledger."""

    def answer(request: RecordedRequest) -> ScriptedReply:
        asked = request.messages[1]["content"].count("Pair ")
        verdicts = [{"pair": n, "same": False} for n in range(1, asked + 1)]
        return ScriptedReply(content=json.dumps({"pairs": verdicts}))

    from confide.storage.sqlite import SqliteStorage

    storage = SqliteStorage(folder / "ledger.db", features=FEATURES)
    storage.migrate()
    ledger = UsageLedger(SqlAppTables(storage))
    with ScriptedLLMServer(responder=answer) as server:
        llm = MeteredLLM(OpenAICompatibleLLM(base_url=server.base_url, model="scripted"), ledger)
        asyncio.run(LLMJudge(llm).judge(pairs, account_id=ACCOUNT, user_id="estimate"))
    totals = ledger.report(ACCOUNT, since=None).operations
    storage.close()
    return {
        "pairs": len(pairs),
        "calls": sum(t.calls for t in totals),
        "prompt_tokens": sum(t.prompt_tokens for t in totals),
        "completion_tokens": sum(t.completion_tokens for t in totals),
    }


# ---- 4. throughput ---------------------------------------------------------------------------
PEOPLE = ["Anna", "Ben", "Carla", "David", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas"]
ACTIVITIES = [
    "went hiking",
    "started a pottery class",
    "ran a half marathon",
    "painted the kitchen",
    "read a novel about sailing",
    "cooked a Thai curry",
    "fixed the bicycle",
    "planted tomatoes",
    "visited an old friend",
    "learned to knit",
    "signed up for a choir",
    "baked sourdough",
]
PLACES = ["the lake", "Lisbon", "the market", "the gym", "the library", "Kyoto", "the beach"]
TIMES = ["last weekend", "on Tuesday", "in March", "yesterday", "two weeks ago", "in June"]
FEELINGS = ["happy", "tired", "proud", "anxious", "relaxed", "excited", "lonely", "calm"]
WITH = ["alone", "with a neighbour", "with the grandchildren", "with an old colleague"]


def fact_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct template facts in a fixed shuffled order."""
    combos = list(itertools.product(PEOPLE, ACTIVITIES, PLACES, TIMES, FEELINGS, WITH))
    if n > len(combos):
        raise SystemExit(f"at most {len(combos)} distinct facts")
    order = np.random.default_rng(seed).permutation(len(combos))[:n]
    return [
        "{} {} at {} {} {} and felt {}.".format(*(combos[i][j] for j in (0, 1, 2, 3, 5, 4)))
        for i in order
    ]


def throughput(
    backend: str, local: Embedder, size: int, pool_size: int, pass_candidates: int, threshold: float
) -> dict[str, Any]:
    texts = fact_texts(size)
    if pool_size and pool_size < size:
        embedder: Embedder = PoolEmbedder(local, texts, pool_vectors(local, texts[:pool_size]))
    else:
        embedder = local
    with (
        tempfile.TemporaryDirectory(prefix="confide-consolidation-") as tmp,
        bench_storage(backend, Path(tmp)) as storage,
    ):
        app = open_confide(storage, embedder, Path(tmp))
        engine = app.engine
        t0 = time.perf_counter()
        with progress_bar(f"{backend} store", "memories") as progress:
            for start in range(0, size, 1000):
                engine.store_many(
                    [
                        {"account_id": ACCOUNT, "user_id": "big", "key": "note", "value": text}
                        for text in texts[start : start + 1000]
                    ]
                )
                progress(min(size, start + 1000), size)
        load_s = time.perf_counter() - t0
        settle(storage)
        judge = OfflineJudge(embedder, same_cosine=threshold, same_key_cosine=threshold)
        t0 = time.perf_counter()
        daily = consolidate(engine, judge, "big")
        daily_s = time.perf_counter() - t0
        # The cap lifted and the candidates bounded: how fast memories are consolidated.
        t0 = time.perf_counter()
        full = consolidate(
            engine,
            judge,
            "big",
            max_candidates=pass_candidates,
            consolidation_pairs_per_day=10**9,
        )
        full_s = time.perf_counter() - t0
        active = engine.storage.count_memories(MemoryFilter(account_id=ACCOUNT, user_id="big"))
        app.access.close()
    return {
        "size": size,
        "pool": pool_size,
        "load_s": round(load_s, 1),
        "daily_run_s": round(daily_s, 2),
        "daily_candidates": daily.candidates,
        "daily_pairs": daily.pairs,
        "daily_merges": daily.merges,
        "pass_s": round(full_s, 2),
        "pass_candidates": full.candidates,
        "pass_pairs": full.pairs,
        "pass_merges": full.merges,
        "memories_per_s": round(full.candidates / full_s, 1) if full_s else None,
        "active_after": active,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--pass-candidates", type=int, default=2000)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    local = LocalMiniLMEmbedder(threads=2)
    out: dict[str, Any] = {"backend": args.backend}

    dev, held = split_pairs(read_jsonl(PAIRS))
    threshold = choose_threshold(dev, local)
    out["threshold"] = threshold
    out["dev"] = scores(dev, local, threshold)
    out["held_out"] = scores(held, local, threshold)
    out["held_out_2"] = scores(read_jsonl(PAIRS_SECOND), local, threshold)
    out["held_out_3"] = scores(read_jsonl(PAIRS_FRESH), local, threshold)
    print(f"offline judge: cosine {threshold} chosen on the dev half ({len(dev)} pairs)")
    for name in ("dev", "held_out", "held_out_2", "held_out_3"):
        s = out[name]
        print(
            f"  {name:10s} merges between different facts: "
            f"{s['false_merges']}/{s['different_pairs']}   paraphrase pairs merged: "
            f"{s['same_merged']}/{s['same_pairs']} ({s['recall']})"
        )

    left, report, seen = paraphrases(args.backend, local, threshold)
    out["paraphrases"] = {
        "inserts": 15,
        "facts": 5,
        "active_after": left,
        "merges": report.merges,
        "pairs": report.pairs,
    }
    print(
        f"15 paraphrased inserts of 5 facts -> {left} active memories after one daily run (goal 5)"
    )

    labelled = [_pair(r) for r in dev + held]
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        para = llm_estimate(seen, Path(one))
        capped = llm_estimate(labelled[:50], Path(two))
    out["llm_per_user_day"] = {
        "offline": {"calls": 0, "tokens": 0},
        "paraphrase_user": para,
        "at_cap": capped,
    }
    print("LLM per user per day: offline judge 0 calls, 0 tokens")
    for name, e in (("paraphrase user", para), ("at the cap", capped)):
        print(
            f"  LLM judge, {name}: {e['pairs']} pairs -> {e['calls']} calls, "
            f"{e['prompt_tokens']} prompt + {e['completion_tokens']} completion tokens"
        )

    tp = throughput(args.backend, local, args.size, args.pool, args.pass_candidates, threshold)
    out["throughput"] = tp
    print(
        f"throughput, {tp['size']} memories of one user ({args.backend}, load {tp['load_s']} s): "
        f"daily run {tp['daily_run_s']} s ({tp['daily_candidates']} candidates, "
        f"{tp['daily_pairs']} pairs, {tp['daily_merges']} merges); "
        f"pass of {tp['pass_candidates']} candidates in {tp['pass_s']} s = "
        f"{tp['memories_per_s']} memories consolidated/s ({tp['pass_pairs']} pairs, "
        f"{tp['pass_merges']} merges)"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
