"""A store for ``confide serve`` subprocesses (SQLite in a folder, or an embedded PostgreSQL),
with the settings that read it and the environment that serves it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confide.config import Settings
from confide.testing.processes import confide_env

KEY = "66" * 32
"""The benchmarks' key-encryption key (throw-away stores only)."""


@dataclass(frozen=True)
class ServedStore:
    """Where the store lives, the settings that open it and ``confide serve``'s environment."""

    backend: str
    settings: Settings
    env: dict[str, str]


@contextmanager
def served_store(backend: str, folder: Path, *, pool_max: int = 8) -> Iterator[ServedStore]:
    """A fresh store under ``folder`` (``sqlite`` or ``postgres``); the PostgreSQL server
    is stopped on exit. ``pool_max`` sizes each service process's connection pool."""
    server = None
    if backend == "sqlite":
        data, keys = f"sqlite:///{folder / 'confide.db'}", f"sqlite:///{folder / 'keys.db'}"
    else:
        from confide.testing.postgres import EmbeddedPostgres

        server = EmbeddedPostgres(folder / "pg")
        data, keys = server.create_database("bench"), server.create_database("bench_keys")
    settings = Settings(
        home=folder / "home", storage_url=data, keystore_url=keys, encryption_key=KEY
    )
    env = confide_env(
        {
            "CONFIDE_HOME": str(folder / "home"),
            "CONFIDE_STORAGE_URL": data,
            "CONFIDE_KEYSTORE_URL": keys,
            "MEMORY_ENCRYPTION_KEY": KEY,
            "CONFIDE_POSTGRES_POOL_MAX": str(pool_max),
        }
    )
    try:
        yield ServedStore(backend, settings, env)
    finally:
        if server is not None:
            server.stop()
