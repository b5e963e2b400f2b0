"""Store / update / get / list latency for 10,000 memories on each backend.

    python bench/store.py [--n 10000] [--backend sqlite|postgres|both] [--json OUT]

Prints p50/p95 in ms per operation and the share of store time spent in encryption (inside
``Envelope.seal``: a fresh data key, AES-256-GCM of the payload, wrapping the data key; the
JSON serialisation of the payload is not counted), without embedding.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _engine_side import bench_storage, pct_ms
from _progress import counted
from confide.config import Settings
from confide.crypto.envelope import Envelope
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.index.codec import MemoryCodec
from confide.types import MemoryFilter

KEK = bytes(range(32))
WORDS = [
    "garden",
    "daughter",
    "doctor",
    "coffee",
    "piano",
    "Lisbon",
    "Thursday",
    "walk",
    "dog",
    "Biscuit",
    "tea",
    "sister",
    "appointment",
    "knee",
    "physio",
    "choir",
    "birthday",
    "recipe",
    "lemon",
    "cake",
    "train",
    "station",
    "nurse",
]


class TimedEnvelope(Envelope):
    """Counts the seconds spent encrypting: data-key generation, AES-GCM, key wrapping."""

    seconds = 0.0

    def seal(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return super().seal(*args, **kwargs)
        finally:
            TimedEnvelope.seconds += time.perf_counter() - start


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize() + "."


# `...`: the callers' lambdas bind loop variables as default arguments, which mypy cannot
# check against `Callable[[], Any]`.
def _timed(fn: Callable[..., Any], into: list[float]) -> Any:
    start = time.perf_counter()
    result = fn()
    into.append(time.perf_counter() - start)
    return result


def run(kind: str, n: int, workdir: Path) -> dict[str, Any]:
    """Measure one backend."""
    rng = random.Random(7)
    with bench_storage(kind, workdir) as storage:
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=Settings(home=workdir))
        engine.codec = MemoryCodec(TimedEnvelope(engine.envelope.cipher, engine.keyring))
        TimedEnvelope.seconds = 0.0
        users = [f"user-{i}" for i in range(50)]
        store: list[float] = []
        ids: list[str] = []
        for i in counted(range(n), f"{kind} store", "memories"):
            memory = _timed(
                lambda i=i: engine.store(
                    {
                        "account_id": "bench",
                        "user_id": users[i % len(users)],
                        "key": f"key_{i}",
                        "value": _sentence(rng),
                        "type": "fact",
                    }
                ),
                store,
            )
            ids.append(memory.id)
        seal_share = TimedEnvelope.seconds / sum(store)
        sample = rng.sample(ids, min(1000, n))
        update: list[float] = []
        for memory_id in counted(sample, f"{kind} update", "memories"):
            _timed(
                lambda m=memory_id: engine.update(m, {"value": _sentence(rng)}, account_id="bench"),
                update,
            )
        get: list[float] = []
        for memory_id in counted(rng.sample(ids, min(2000, n)), f"{kind} get", "memories"):
            _timed(lambda m=memory_id: engine.get(m, account_id="bench"), get)
        listing: list[float] = []
        for i in counted(range(300), f"{kind} list", "lists"):
            flt = MemoryFilter(account_id="bench", user_id=users[i % len(users)])
            _timed(lambda f=flt: engine.list_memories(f, limit=20), listing)
    result: dict[str, Any] = {
        op: {"p50_ms": round(pct_ms(s, 0.5), 3), "p95_ms": round(pct_ms(s, 0.95), 3), "n": len(s)}
        for op, s in (("store", store), ("update", update), ("get", get), ("list", listing))
    }
    result["encryption_share_of_store"] = round(seal_share, 4)
    result["store_mean_ms"] = round(statistics.fmean(store) * 1000, 3)
    return result


def main() -> None:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="memories to store")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    kinds = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="confide-bench-") as tmp:
        for kind in kinds:
            results[kind] = run(kind, args.n, Path(tmp) / kind)
    print(f"{'backend':<9} {'op':<7} {'p50 ms':>8} {'p95 ms':>8}")
    for kind, figures in results.items():
        for op in ("store", "update", "get", "list"):
            f = figures[op]
            print(f"{kind:<9} {op:<7} {f['p50_ms']:>8.3f} {f['p95_ms']:>8.3f}")
        share = figures["encryption_share_of_store"] * 100
        print(f"{kind:<9} encryption share of store time: {share:.2f}%")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
