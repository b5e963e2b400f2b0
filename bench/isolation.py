"""The isolation machine at full size: random service traffic, every read checked.

    python bench/isolation.py [--steps 20000] [--backend sqlite|postgres|both]

Drives the HTTP service in process with the state machine of ``confide.testing.isolation``
(two accounts, their keys, users, subjects, conversations, proposals and apps) and counts
every violation instead of stopping at the first: a 5xx, another account's value, another
user's private value, a forgotten or superseded value read back, a version going back.
Then searches the database files (WAL included) and every log line of the run for the
values it wrote. Prints steps, requests, violations (goal: 0), values found in clear
(goal: 0) and steps/s per backend.
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter

from _engine_side import bench_engine
from _progress import progress_bar, say
from confide.storage.base import Capability
from confide.testing.forensics import logical_dumps
from confide.testing.isolation import (
    IsolationReport,
    isolation_service,
    markers_in_clear,
    run_isolation,
)


class Lines(logging.Handler):
    """Keeps every log line of the run, to search for markers afterwards."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the formatted line."""
        self.lines.append(self.format(record))


def run(backend: str, steps: int) -> tuple[IsolationReport, int]:
    """Run the machine for ``steps`` steps on a fresh store of ``backend``; the report and
    the count of markers found in clear in the database files (WAL included) or the logs."""
    lines = Lines()
    root = logging.getLogger("confide")  # everything Confide logs, at every level
    root.addHandler(lines)
    root.setLevel(logging.DEBUG)
    try:
        with bench_engine(backend, prefix="confide-isolation-", pool_max=4) as engine:
            with (
                isolation_service(engine, engine.settings) as service,
                progress_bar(f"{backend} isolation", "steps") as show,
            ):

                def progress(r: IsolationReport) -> None:
                    show(r.steps, steps)
                    say(
                        f"  {backend}: {r.steps} steps, {len(r.violations)} violations"
                        + "".join(f"\n    {v}" for v in r.violations[-3:])
                    )

                report = run_isolation(service, min_steps=steps, strict=False, progress=progress)
            storage = engine.storage
            has_files = Capability.DATA_FILES in storage.capabilities
            files = storage.data_files() if has_files else []
            dumps = logical_dumps(getattr(storage, "conninfo", ""))
            clear = markers_in_clear(report, files, "\n".join(lines.lines), dumps)
            return report, len(clear)
    finally:
        root.removeHandler(lines)


def main() -> None:
    """Parse the arguments, run each backend, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = {backend: run(backend, args.steps) for backend in backends}
    print()
    header = ("backend", "steps", "requests", "violations", "in clear", "steps/s")
    print("{:<10} {:>7} {:>9} {:>10} {:>8} {:>8}".format(*header))
    for backend, (r, clear) in results.items():
        rate = r.steps / r.seconds if r.seconds else 0.0
        print(
            f"{backend:<10} {r.steps:>7} {r.requests:>9} {len(r.violations):>10} "
            f"{clear:>8} {rate:>8.1f}"
        )
    for backend, (r, _) in results.items():
        seen = ", ".join(f"{name} {n}" for name, n in sorted(r.seen.items()))
        print(f"{backend} reads saw: {seen}")
        for message, n in Counter(r.violations).most_common():
            print(f"{backend} violation x{n}: {message}")


if __name__ == "__main__":
    main()
