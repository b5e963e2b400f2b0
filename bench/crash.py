"""Crash safety at full size: ``kill -9`` of ``confide serve`` and its background worker during
1,000 concurrent writes, ten times, on SQLite and on PostgreSQL.

Each round starts ``confide serve`` on the same store, sends ``--writes`` writes (new memories
and updates of earlier ones) from ``--clients`` concurrent clients, and kills the service
with SIGKILL once a random share (10 to 90%) of them has been acknowledged. After every
restart the store's integrity check and consistency queries run (see
``confide.testing.crash``); at the end every acknowledged write is read back. Prints, per
backend, acknowledged / present / orphaned (goal: present = acknowledged, orphaned 0) and
the failed integrity checks.

With ``--worker`` (the default) a background worker with TTL work dies at each kill too: on
SQLite the worker thread of ``confide serve``, on PostgreSQL an ``confide worker`` process.
After the last restart the live worker drains the queue; prints the worker kills, the jobs
the killed workers held, and what the drained queue shows (goal: stranded, failed, doubled
TTL events and fading notes left active all 0).

    python bench/crash.py [--kills 10] [--writes 1000] [--clients 50] [--backend sqlite]
                          [--worker | --no-worker]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _progress import progress_bar, say
from _served import served_store
from confide.testing.crash import crash_rounds
from confide.types import Progress


def _rounds(backend: str, kills: int, show: Progress) -> Callable[[str], None]:
    """``crash_rounds``' progress: its line (one a round) printed, and the bar moved on."""
    done = itertools.count(1)

    def progress(line: str) -> None:
        say(f"{backend}: {line}")
        show(next(done), kills)

    return progress


def main() -> int:
    """Run the rounds per backend and print the counts; exit 1 if any goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), action="append")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--worker",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="kill a busy background worker with the service (default: on)",
    )
    args = parser.parse_args()
    failed = False
    for backend in args.backend or ["sqlite", "postgres"]:
        with (
            tempfile.TemporaryDirectory(prefix="confide-crash-") as tmp,
            served_store(backend, Path(tmp)) as store,
            progress_bar(f"{backend} kills", "rounds") as show,
        ):
            started = time.perf_counter()
            report = crash_rounds(
                settings=store.settings,
                env=store.env,
                rounds=args.kills,
                writes=args.writes,
                concurrency=args.clients,
                seed=args.seed,
                worker=args.worker,
                progress=_rounds(backend, args.kills, show),
            )
        in_flight = sum(r.lost_in_flight for r in report.rounds)
        worst = max((c.orphaned for c in report.checks), default=0)
        print(
            f"{backend}: {args.kills} kills x {args.writes} writes from {args.clients} clients: "
            f"acknowledged {report.acknowledged}, present {report.present}, "
            f"orphaned {worst} (most after any restart), "
            f"integrity checks failed {report.integrity_failures}/{len(report.checks)}, "
            f"in flight at the kills {in_flight}, unexpected answers {len(report.errors)}, "
            f"values in clear in the files or a dump {report.values_in_clear} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
        queue = report.queue
        if queue is not None:
            where = "serve's worker thread" if backend == "sqlite" else "confide worker process"
            print(
                f"{backend}: worker kills {report.worker_kills} ({where}), "
                f"jobs held at the kills {report.jobs_held}; after the drain: "
                f"{queue.due} jobs due, stranded {queue.stranded}, failed {queue.failed}, "
                f"run again {queue.rerun}, memories retired by TTL {queue.retired}, "
                f"TTL done twice {queue.ttl_twice}, fading notes left active "
                f"{queue.fading_not_retired}",
                flush=True,
            )
        for kind, count in Counter(report.errors).most_common(10):
            print(f"  unexpected x{count}: {kind}")
        warnings = Counter(w for r in report.rounds for w in r.server_warnings)
        for line, count in warnings.most_common(10):
            print(f"  service said x{count}: {line[:200]}")
        for n, check in enumerate(report.checks, 1):
            if check.integrity or check.orphaned:
                print(f"  after kill {n}: {check.integrity[:5]} {check.orphans}")
        failed |= (
            report.present != report.acknowledged
            or worst > 0
            or report.integrity_failures > 0
            or bool(report.errors)
            or report.values_in_clear > 0
            or (queue is not None and queue.problems > 0)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
