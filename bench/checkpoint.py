"""ConfideCheckpointSaver: save and load latency of a LangGraph checkpoint on each backend.

    python bench/checkpoint.py [--n 500] [--backend sqlite|postgres|both] [--keep-last N]

Each step saves a checkpoint like a chat graph's (a ``messages`` channel that grows by two
messages of about 200 characters a step, plus two small channels, each sealed under the
thread owner's key) and its pending writes, then loads the thread's latest checkpoint. Prints
p50/p95 in ms for ``put`` + ``put_writes`` (save) and ``get_tuple`` (load). The budget is
p95 < 100 ms for both.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from _progress import counted
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.langgraph import ConfideCheckpointSaver
from confide.storage import FEATURES
from confide.storage.base import Storage
from confide.storage.keystore import open_key_store

KEK = bytes(range(32))
MESSAGE = "The physio said the knee is healing well; walk twice a day and rest on Sundays. " * 3
BUDGET_MS = 100.0


@contextmanager
def _storage(kind: str, workdir: Path) -> Iterator[tuple[Storage, str]]:
    if kind == "sqlite":
        from confide.storage.sqlite import SqliteStorage

        sqlite = SqliteStorage(str(workdir / "bench.db"), features=FEATURES)
        sqlite.migrate()
        try:
            yield sqlite, f"sqlite:///{workdir / 'keys.db'}"
        finally:
            sqlite.close()
        return
    from confide.storage.postgres import PostgresStorage
    from confide.testing.postgres import EmbeddedPostgres

    server = EmbeddedPostgres(workdir / "pg")
    postgres = PostgresStorage(server.create_database("bench"), features=FEATURES)
    postgres.migrate()
    try:
        yield postgres, server.create_database("bench_keys")
    finally:
        postgres.close()
        server.stop()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(kind: str, n: int, keep_last: int | None, workdir: Path) -> dict[str, float]:
    with _storage(kind, workdir) as (storage, keys_url):
        key_store = open_key_store(keys_url)
        settings = Settings(home=workdir / "home", encryption_key=KEK.hex(), embedder="none")
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings, key_store=key_store)
        saver = ConfideCheckpointSaver(engine, account_id="bench", keep_last=keep_last)
        config: RunnableConfig = {
            "configurable": {"thread_id": "thread-1", "checkpoint_ns": "", "user_id": "ann"}
        }
        messages: list[dict[str, Any]] = []
        checkpoint: Checkpoint = empty_checkpoint()
        saves: list[float] = []
        loads: list[float] = []
        version: str | None = None
        for step in counted(range(n), f"{kind} checkpoints", "steps"):
            messages = [*messages, {"role": "user", "content": MESSAGE}]
            messages.append({"role": "assistant", "content": MESSAGE[::-1]})
            version = saver.get_next_version(version, None)
            versions: ChannelVersions = {"messages": version, "step": version, "route": version}
            checkpoint = {
                **checkpoint,
                "id": str(uuid6(clock_seq=step)),
                "channel_values": {"messages": messages, "step": step, "route": "chat"},
                "channel_versions": versions,
            }
            start = time.perf_counter()
            config = saver.put(config | {}, checkpoint, {"source": "loop", "step": step}, versions)
            config["configurable"]["user_id"] = "ann"
            saver.put_writes(config, [("messages", messages[-1])], task_id=f"task-{step}")
            saves.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            loaded = saver.get_tuple(
                {"configurable": {"thread_id": "thread-1", "checkpoint_ns": "", "user_id": "ann"}}
            )
            loads.append((time.perf_counter() - start) * 1000)
            assert loaded is not None and len(loaded.checkpoint["channel_values"]["messages"]) == (
                2 * (step + 1)
            )
        engine.close()
        key_store.close()
    return {
        "save_p50": statistics.median(saves),
        "save_p95": _pct(saves, 0.95),
        "load_p50": statistics.median(loads),
        "load_p95": _pct(loads, 0.95),
    }


def main() -> None:
    """Run the benchmark and print one line per backend."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="steps (checkpoints) per backend")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--keep-last", type=int, default=20, help="retention (0: keep all)")
    args = parser.parse_args()
    kinds = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    keep = args.keep_last or None
    failed = False
    for kind in kinds:
        with tempfile.TemporaryDirectory() as folder:
            r = run(kind, args.n, keep, Path(folder))
        ok = r["save_p95"] < BUDGET_MS and r["load_p95"] < BUDGET_MS
        failed |= not ok
        print(
            f"{kind:8} n={args.n} keep_last={keep}: save p50 {r['save_p50']:.2f} ms, "
            f"p95 {r['save_p95']:.2f} ms; load p50 {r['load_p50']:.2f} ms, "
            f"p95 {r['load_p95']:.2f} ms {'OK' if ok else 'OVER BUDGET'}"
        )
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
