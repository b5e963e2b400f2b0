"""A serving process: its query latency and resident memory, for ``bench/scale.py``: run as a
child process.

The bench's own process is no measure of either: it filled the store (Python keeps much of
what the fill allocated, and its collector walks all of it), holds every text and pool
vector, and, on SQLite, has touched the whole database file through its memory map. This
child opens the filled store the way a service would (the same engine and key ring, the
configured embedder through ``build_embedder``, ``Confide.warm_up``), answers the first
``WARM`` of the given questions untimed, waits for the background work of the SQLite vector
index they started (a large owner's partition), answers the rest timed, one after another
(the parent waits meanwhile), and prints one JSON line: the timed queries' ``p50_ms`` and
``p95_ms``, and ``/proc/self/status``'s ``VmRSS``, ``RssAnon`` (the process's own memory: the
embedder's graphs, SQLite's in-process index, caches) and ``RssFile`` (file pages mapped into
it, the SQLite database's among them, which the kernel can drop and read again), in MB.

    python bench/_resident.py BACKEND TARGET KEY_HEX HOME ACCOUNT USER WARM TOP_K < questions

``TARGET`` is the SQLite file or PostgreSQL's connection string; the questions come one a
line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _compare import p50_p95
from _locomo_data import REPO_ROOT
from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import build_embedder
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.base import Storage

_FIELDS = ("VmRSS", "RssAnon", "RssFile")


def resident() -> dict[str, float]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` of this process in MB (empty off Linux)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in _FIELDS:
            found[name] = round(int(value.split()[0]) * 1024 / 1e6, 1)
    return found


def _storage(backend: str, target: str) -> Storage:
    if backend == "sqlite":
        from confide.storage.sqlite import SqliteStorage

        return SqliteStorage(Path(target), features=FEATURES)
    from confide.storage.postgres import PostgresStorage

    return PostgresStorage(target, features=FEATURES)


def measure(
    backend: str,
    target: str,
    key: bytes,
    home: Path,
    owner: tuple[str, str],
    asked: Sequence[str],
    *,
    warm: int,
    top_k: int,
) -> dict[str, float]:
    """Run the child on ``asked`` (the first ``warm`` untimed) for ``owner`` (account,
    user) and return what it printed."""
    account, user = owner
    command = [backend, target, key.hex(), str(home), account, user, str(warm), str(top_k)]
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), *command],
        input="\n".join(asked),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    measured: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def main(argv: Sequence[str]) -> None:
    backend, target, key_hex, home, account, user, warm_text, top_k_text = argv
    warm, top_k = int(warm_text), int(top_k_text)
    asked = [line for line in sys.stdin.read().splitlines() if line.strip()]
    settings = Settings(home=Path(home), encryption_key=key_hex, link_top_k=0)
    engine = MemoryEngine(
        _storage(backend, target), KeyRing(primary=bytes.fromhex(key_hex)), settings=settings
    )
    with Confide(engine, embedder=build_embedder(settings.embedder), settings=settings) as app:
        app.warm_up(progress=lambda _line: None)
        owner = {"agent": "default", "account_id": account, "user_id": user}
        totals: list[float] = []
        index = getattr(engine.storage, "vector_index", None)
        for i, question in enumerate(asked):
            if i == warm and index is not None:
                # Once warm, as a service is a little after its start: a large owner's index
                # partition, which the first question handed to the background, is built.
                index.flush()
            request = {**owner, "query": question, "top_k": top_k}
            t0 = time.perf_counter()
            found = app.query(request)
            if i >= warm:
                totals.append((time.perf_counter() - t0) * 1000)
            assert found.results, "a query found nothing"
        p50, p95 = p50_p95(totals) if totals else (None, None)
        print(json.dumps({"p50_ms": p50, "p95_ms": p95, **resident()}))


if __name__ == "__main__":
    main(sys.argv[1:])
