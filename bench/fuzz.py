"""Schema-driven hostile requests at full size: every route, valid and invalid cases.

    python bench/fuzz.py [--cases 5000] [--backend sqlite|postgres|both]

Sends cases drawn by schemathesis from the service's own OpenAPI schema (see
``confide.testing.fuzz``) through the in-process client, with an admin key, until at least
``--cases`` were sent per backend. Prints cases, answers by status, problems (goal: 0: no
5xx, every 4xx a JSON error naming its problem) and cases/s.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from _engine_side import bench_engine
from _progress import progress_bar, say
from confide.testing.fuzz import FuzzReport, fuzz_app
from confide.testing.isolation import isolation_service

PER_ROUND = 20
"""Cases per operation and mode in one round (rounds repeat until enough were sent)."""


def run(backend: str, cases: int) -> tuple[FuzzReport, float]:
    """Fuzz a fresh store of ``backend`` until ``cases`` were sent; the report and seconds."""
    total = FuzzReport()
    with bench_engine(backend, prefix="confide-fuzz-", pool_max=4) as engine:
        start = time.perf_counter()
        with (
            isolation_service(engine, engine.settings) as service,
            progress_bar(f"{backend} fuzz", "cases") as progress,
        ):
            token = service.app.state.services.keys.create("acct-fuzz", admin=True)
            while total.cases < cases:
                report = fuzz_app(
                    service,
                    token,
                    cases_per_operation=PER_ROUND,
                    progress=lambda r: progress(total.cases + r.cases, cases),
                )
                total.cases += report.cases
                total.operations = report.operations
                total.statuses.update(report.statuses)
                total.problems.extend(report.problems)
                say(f"  {backend}: {total.cases} cases")
        return total, time.perf_counter() - start


def main() -> None:
    """Parse the arguments, run each backend, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=5_000)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = {backend: run(backend, args.cases) for backend in backends}
    print()
    print(
        f"{'backend':<10} {'operations':>10} {'cases':>7} {'5xx':>5} {'problems':>8} {'cases/s':>8}"
    )
    for backend, (r, seconds) in results.items():
        server_errors = sum(n for status, n in r.statuses.items() if status >= 500)
        rate = r.cases / seconds if seconds else 0.0
        print(
            f"{backend:<10} {r.operations:>10} {r.cases:>7} {server_errors:>5} "
            f"{len(r.problems):>8} {rate:>8.1f}"
        )
    for backend, (r, _) in results.items():
        statuses = ", ".join(f"{status}: {n}" for status, n in sorted(r.statuses.items()))
        print(f"{backend} answers by status: {statuses}")
        for problem, n in Counter(r.problems).most_common():
            print(f"{backend} problem x{n}: {problem}")


if __name__ == "__main__":
    main()
