"""TTL and purge throughput: one ``confide worker --once`` run over a store with idle memories.

Usage: python bench/ttl.py [--backend sqlite|postgres|both] [--memories 20000] [--json OUT]

Stores ``--memories`` memories of 100 users (importance 1-5), makes every other one look
written and last read 61 days ago, then runs the standard worker once (the hourly ``ttl``
and ``purge`` jobs) and prints how many memories the TTL retired, in how long, and how long
a second run (nothing left to do) and a purge of all of them 31 days later take.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _engine_side import bench_storage
from _progress import progress_bar
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.workers import standard_worker

ACCOUNT = "bench-acct"
KEK = bytes(range(32))
DAY = 86_400.0


def run(backend: str, memories: int) -> dict[str, Any]:
    """One backend's figures."""
    with tempfile.TemporaryDirectory() as folder, bench_storage(backend, Path(folder)) as storage:
        settings = Settings(home=Path(folder) / "home", encryption_key=KEK.hex(), embedder="none")
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
        started = time.perf_counter()
        ids: list[str] = []
        with progress_bar(f"{backend} store", "memories") as progress:
            for start in range(0, memories, 1000):
                batch = [
                    {
                        "account_id": ACCOUNT,
                        "user_id": f"user-{n % 100}",
                        "key": f"fact.{n}",
                        "value": f"remembered detail number {n}",
                        "importance": 1 + n % 5,
                    }
                    for n in range(start, min(memories, start + 1000))
                ]
                ids += [m.id for m in engine.store_many(batch)]
                progress(len(ids), memories)
        load_s = time.perf_counter() - started
        long_ago = time.time() - 61 * DAY
        with storage.transaction() as tx:
            for memory_id in ids[::2]:
                tx.update_memory(memory_id, {"updated_at": long_ago, "last_accessed_at": long_ago})
        expected = sum(1 for n in range(0, memories, 2) if 1 + n % 5 < 3)

        started = time.perf_counter()
        with progress_bar(f"{backend} worker --once", "jobs") as progress:
            first = standard_worker(engine, settings).run_once(progress=progress)
        ttl_s = time.perf_counter() - started
        retired = engine.op_counts(by="op").get("ttl", 0)
        started = time.perf_counter()
        engine.expire_idle(idle_days=60, importance_below=3)
        idle_run_s = time.perf_counter() - started
        started = time.perf_counter()
        purged = engine.purge_expired(now=time.time() + 31 * DAY).purged
        purge_s = time.perf_counter() - started
        return {
            "backend": backend,
            "memories": memories,
            "load_s": round(load_s, 2),
            "jobs_done": first.done,
            "retired": retired,
            "expected": expected,
            "ttl_run_s": round(ttl_s, 2),
            "retired_per_s": round(retired / ttl_s) if ttl_s else None,
            "second_ttl_run_ms": round(idle_run_s * 1000, 1),
            "purged_versions": purged,
            "purge_s": round(purge_s, 2),
            "purged_per_s": round(purged / purge_s) if purge_s else None,
        }


def main() -> None:
    """Parse arguments, run each backend, print (and optionally write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results = [run(b, args.memories) for b in backends]
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    for r in results:
        print(
            f"{r['backend']}: {r['memories']} memories (loaded in {r['load_s']} s); "
            f"worker --once: {r['jobs_done']} jobs, TTL retired {r['retired']} "
            f"(expected {r['expected']}) in {r['ttl_run_s']} s = {r['retired_per_s']}/s; "
            f"a second TTL run {r['second_ttl_run_ms']} ms; purge of {r['purged_versions']} "
            f"versions {r['purge_s']} s = {r['purged_per_s']}/s"
        )


if __name__ == "__main__":
    main()
