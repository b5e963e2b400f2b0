"""A serving process's resident memory, for ``bench/scale.py``: run as a child process.

The bench's own process is no measure of it: it filled the store (Python keeps much of what
the fill allocated), holds every text and pool vector, and, on SQLite, has touched the whole
database file through its memory map. This child opens the filled store the way a service
would (the same engine and key ring, the configured embedder through ``build_embedder``,
``Confide.warm_up``), answers the given questions for one user, and prints one JSON line:
``/proc/self/status``'s ``VmRSS``, ``RssAnon`` (the process's own memory: the embedder's
graphs, SQLite's in-process index, caches) and ``RssFile`` (file pages mapped into it, the
SQLite database's among them, which the kernel can drop and read again), in MB.

    python bench/_resident.py BACKEND TARGET KEY_HEX HOME ACCOUNT USER < questions (one a line)

``TARGET`` is the SQLite file or PostgreSQL's connection string.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

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
    backend: str, target: str, key: bytes, home: Path, account: str, user: str, asked: Sequence[str]
) -> dict[str, float]:
    """Run the child on ``asked`` and return what it printed."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), backend, target, key.hex(), str(home), account, user],
        input="\n".join(asked),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    measured: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def main(argv: Sequence[str]) -> None:
    backend, target, key_hex, home, account, user = argv
    asked = [line for line in sys.stdin.read().splitlines() if line.strip()]
    settings = Settings(home=Path(home), encryption_key=key_hex, link_top_k=0)
    engine = MemoryEngine(
        _storage(backend, target), KeyRing(primary=bytes.fromhex(key_hex)), settings=settings
    )
    with Confide(engine, embedder=build_embedder(settings.embedder), settings=settings) as app:
        app.warm_up(progress=lambda _line: None)
        for question in asked:
            app.query(
                {"agent": "default", "account_id": account, "user_id": user, "query": question}
            )
        print(json.dumps(resident()))


if __name__ == "__main__":
    main(sys.argv[1:])
