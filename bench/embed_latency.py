"""Time ``LocalMiniLMEmbedder.embed_one`` on short queries (about ten words): p50, p90, mean.

Loading the model is not timed. Each query is distinct, and the bare embedder has no cache.
Compare two trees by running this file with each on ``PYTHONPATH``:

    PYTHONPATH=src python bench/embed_latency.py --rounds 3 [--precision int8,float32]

``--precision`` times each graph of the local model in turn within every round (the int8 one
is what ``embed_one`` runs by default), so the two are compared in the same run.

``--beside`` times the same questions again while another process keeps the other core busy
(``python``: a loop of plain Python; ``embedder``: the same graph embedding questions), each
load in turn within every round, and prints each one's p50 as a ratio of the idle p50 of the
same round. On a machine whose cores share a physical one (or its caches and memory), a lone
embedding slows beside a busy neighbour although nothing in this process competes with it:
the same happens to every step of a query beside its own worker thread.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


_LOADS = {
    "python": "print('busy', flush=True)\nx = 0\nwhile True:\n    x += 1\n",
    "embedder": (
        "from confide.embedders.local import LocalMiniLMEmbedder\n"
        "e = LocalMiniLMEmbedder()\n"
        "e.embed_one('warm up')\n"
        "print('busy', flush=True)\n"
        "while True:\n"
        "    e.embed_one('what did caroline research about adoption agencies last year?')\n"
    ),
}
"""What ``--beside`` runs in a second process: each prints ``busy`` once it loops."""


@contextmanager
def beside(load: str) -> Iterator[subprocess.Popen[str] | None]:
    """Run ``load`` (a key of :data:`_LOADS`, or ``idle`` for nothing) in another process
    for the duration, entered only once it has said it is looping; the process is yielded
    (``None`` for ``idle``) and is ended on exit."""
    if load == "idle":
        yield None
        return
    # Leaving the ``with`` closes the pipe and waits for the killed process.
    with subprocess.Popen(
        [sys.executable, "-c", _LOADS[load]], stdout=subprocess.PIPE, text=True
    ) as busy:
        try:
            if busy.stdout is None or busy.stdout.readline().strip() != "busy":
                raise RuntimeError(f"the {load} load did not start")
            yield busy
        finally:
            busy.kill()


def timed(embedder: LocalMiniLMEmbedder, asked: list[str], label: str) -> list[float]:
    """Milliseconds of ``embed_one`` for each of ``asked``, sorted."""
    times = []
    for text in counted(asked, label, "queries"):
        start = time.perf_counter()
        embedder.embed_one(text)
        times.append((time.perf_counter() - start) * 1000)
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", default="int8", help="comma-separated: int8,float32")
    parser.add_argument(
        "--beside",
        default="",
        help=f"comma-separated loads of the other core, timed after an idle pass: {sorted(_LOADS)}",
    )
    args = parser.parse_args()
    asked_for = args.precision.split(",")
    if unknown := set(asked_for) - set(PRECISIONS):
        parser.error(f"--precision: {sorted(unknown)} not among {sorted(PRECISIONS)}")
    loads = [load for load in args.beside.split(",") if load]
    if unknown := set(loads) - set(_LOADS):
        parser.error(f"--beside: {sorted(unknown)} not among {sorted(_LOADS)}")
    embedders = {p: LocalMiniLMEmbedder(precision=p) for p in PRECISIONS if p in asked_for}
    for embedder in embedders.values():
        for text in queries(20, seed=0):  # load and warm up
            embedder.embed_one(text)
    for round_ in range(args.rounds):
        for name, embedder in embedders.items():
            asked = queries(args.queries, seed=round_ + 1)
            idle = 0.0  # this round's idle p50, timed first
            for load in ["idle", *loads]:
                with beside(load):
                    times = timed(embedder, asked, f"round {round_} {name} {load}")
                p50 = statistics.median(times)
                if load == "idle":
                    idle, where, ratio = p50, "", ""
                else:
                    where, ratio = f" beside {load}", f" ({p50 / idle:.2f} of idle)"
                print(
                    f"round {round_} {name}{where}: p50 {p50:.2f} ms{ratio}, p90 "
                    f"{times[int(len(times) * 0.9)]:.2f} ms, mean {statistics.fmean(times):.2f} "
                    f"ms over {len(times)} queries"
                )


if __name__ == "__main__":
    main()
