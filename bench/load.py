"""Load: 50 concurrent clients x 60 s of mixed traffic on loopback, against one
``confide serve`` on SQLite and against two on one PostgreSQL.

The clients store, update and query memories and make short calls (create, connect, three
turns, a tool call, end), each as a user of its own (see ``confide.testing.load``); with two
services a call's requests are routed by its ``callSessionId``. Prints, per backend, the
requests, the failed answers by route and kind (goal: 0; no "database is locked", no pool
timeouts) and p50/p95 per route.

    python bench/load.py [--clients 50] [--seconds 60] [--backend sqlite] [--servers 2]
                         [--pool-max 8]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _progress import clocked, progress_bar
from _served import served_store
from confide.server.auth import ApiKeys
from confide.storage import open_storage
from confide.testing.forensics import sentinels_in_clear
from confide.testing.load import LOAD_ACCOUNT, SENT_SHAPE, run_load
from confide.testing.processes import serve


def main() -> int:
    """Run the load per backend and print the figures; exit 1 on any failed answer."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), action="append")
    parser.add_argument("--servers", type=int, default=2, help="services on PostgreSQL")
    parser.add_argument(
        "--pool-max", type=int, default=8, help="each service's PostgreSQL connections"
    )
    args = parser.parse_args()
    failed = False
    for backend in args.backend or ["sqlite", "postgres"]:
        servers = 1 if backend == "sqlite" else args.servers
        with (
            tempfile.TemporaryDirectory(prefix="confide-load-") as tmp,
            served_store(backend, Path(tmp), pool_max=args.pool_max) as store,
        ):
            env = {**store.env, "CONFIDE_MIN_SESSION_SECONDS": "0"}
            storage = open_storage(store.settings.resolved_storage_url(), pool_max=2)
            try:
                token = ApiKeys.over(storage).create(LOAD_ACCOUNT)
            finally:
                storage.close()
            with ExitStack() as stack:
                processes = [stack.enter_context(serve(env)) for _ in range(servers)]
                bases = [p.wait_ready() for p in processes]
                with progress_bar(f"{backend} load", "s") as show:
                    load = run_load(bases, token, clients=args.clients, seconds=args.seconds)
                    report = asyncio.run(clocked(load, args.seconds, show))
            # Sentinels, once the services stopped: no value or turn in clear in any file.
            in_clear = sentinels_in_clear(
                store.settings.resolved_storage_url(),
                store.settings.resolved_keystore_url(),
                SENT_SHAPE,
                report.sent,
            )
        errors = sum(report.errors.values())
        print(
            f"{backend}, {servers} confide serve: {args.clients} clients x {args.seconds:.0f} s: "
            f"{report.requests} requests ({report.requests / args.seconds:.0f}/s), "
            f"{errors} errors, {in_clear} of {len(report.sent)} texts sent in clear "
            "in the files or a dump",
            flush=True,
        )
        for kind, count in report.errors.most_common(10):
            print(f"  error x{count}: {kind}")
        print(f"  {'route':<32} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8}")
        for route, (count, p50, p95) in report.percentiles().items():
            print(f"  {route:<32} {count:>8} {p50:>8.1f} {p95:>8.1f}")
        failed |= errors > 0 or in_clear > 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
