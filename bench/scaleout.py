"""Scale-out under faults: three ``confide serve`` and two ``confide worker`` processes on one
embedded PostgreSQL, a bounded mixed load from client threads spread over the services (no
balancer), and, while it runs, a user erased over HTTP, the KEK rotated with ``confide keys
rotate`` and one service and one worker killed with SIGKILL and started again.

The load: memory writes, updates, forgets and queries; chat messages (rolling summaries
run on the workers); app conversation ends (each app kept at its cap by compaction); calls
answered by the service that created them, whose turns and Realtime socket sent to the
other services are refused with 409. See ``confide.testing.scaleout``.

Prints the figures, then one JSON line of them; exits 1 if any goal is missed: acknowledged
writes lost 0, work done twice 0, app caps exact, 5xx answers 0, calls refused elsewhere and
answered at home, the erased user's rows 0 and nothing of them carved from the files.

    python bench/scaleout.py [--users 24] [--clients 6] [--ops 500] [--apps 3]
                             [--app-cap 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from confide.storage import open_storage
from confide.testing.postgres import EmbeddedPostgres
from confide.testing.scaleout import ScaleoutOptions, run_scaleout


def main() -> int:
    """Run the scenario once and print what it found; exit 1 on any missed goal."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=24)
    parser.add_argument("--clients", type=int, default=6, help="client threads")
    parser.add_argument("--ops", type=int, default=500, help="operations per client")
    parser.add_argument("--apps", type=int, default=3)
    parser.add_argument("--app-cap", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    options = ScaleoutOptions(
        users=args.users,
        clients=args.clients,
        ops=args.ops,
        apps=args.apps,
        app_cap=args.app_cap,
        seed=args.seed,
    )
    with tempfile.TemporaryDirectory(prefix="confide-scaleout-") as tmp:
        folder = Path(tmp)
        # Retired WAL segments are deleted, not reused, so the residue scan reads pg_wal too.
        server = EmbeddedPostgres(folder / "pg", settings={"wal_recycle": "off"})
        try:
            data = server.create_database("scaleout")
            keys = server.create_database("scaleout_keys")
            open_storage(data, pool_max=1).close()  # migrated before the processes start
            report = run_scaleout(
                options,
                storage_url=data,
                keystore_url=keys,
                home=folder / "home",
                progress=lambda line: print(f"... {line}", flush=True),
            )
        finally:
            server.stop()
    print("\n".join(report.lines()))
    problems = report.problems()
    for problem in problems:
        print(f"MISSED: {problem[:500]}")
    print(json.dumps(report.summary()))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
