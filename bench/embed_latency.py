"""Time ``LocalMiniLMEmbedder.embed_one`` on short queries (about ten words): p50, p90, mean.

Loading the model is not timed. Each query is distinct, and the bare embedder has no cache.
Compare two trees by running this file with each on ``PYTHONPATH``:

    PYTHONPATH=src python bench/embed_latency.py --rounds 3 [--precision int8,float32]

``--precision`` times each graph of the local model in turn within every round (the int8 one
is what ``embed_one`` runs by default), so the two are compared in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from _progress import counted
from confide.embedders.local import PRECISIONS, LocalMiniLMEmbedder

_TEXT = (
    "what did caroline research about adoption agencies last year when melanie painted the "
    "lake sunrise and which pet does ann have now that she moved to berlin for work with "
    "her partner who likes hiking camping pottery music concerts and reading science fiction"
)
WORDS = _TEXT.split()


def queries(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(10)) + "?" for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", default="int8", help="comma-separated: int8,float32")
    args = parser.parse_args()
    asked_for = args.precision.split(",")
    if unknown := set(asked_for) - set(PRECISIONS):
        parser.error(f"--precision: {sorted(unknown)} not among {sorted(PRECISIONS)}")
    embedders = {p: LocalMiniLMEmbedder(precision=p) for p in PRECISIONS if p in asked_for}
    for embedder in embedders.values():
        for text in queries(20, seed=0):  # load and warm up
            embedder.embed_one(text)
    for round_ in range(args.rounds):
        for name, embedder in embedders.items():
            times = []
            asked = queries(args.queries, seed=round_ + 1)
            for text in counted(asked, f"round {round_} {name}", "queries"):
                start = time.perf_counter()
                embedder.embed_one(text)
                times.append((time.perf_counter() - start) * 1000)
            times.sort()
            p90 = times[int(len(times) * 0.9)]
            print(
                f"round {round_} {name}: p50 {statistics.median(times):.2f} ms, p90 "
                f"{p90:.2f} ms, mean {statistics.fmean(times):.2f} ms over {len(times)} queries"
            )


if __name__ == "__main__":
    main()
