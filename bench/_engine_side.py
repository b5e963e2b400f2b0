"""Confide's side of the LoCoMo harness on the real engine (SQLite or embedded PostgreSQL).

Each conversation is one user; each dialogue turn one memory (``episodic``), with the
speaker and session date in its metadata and the session as its ``run_id``, stored through
``MemoryEngine.store_many`` (one batch per session) with the vector indexer wired in by
:class:`confide.client.Confide`. Questions go through :func:`confide.retrieval.query.retrieve`
over :class:`StorageCandidateSource`, exactly as ``memory_query`` does, minus the
per-category ``rag_length`` cap (the benchmark asks for 20 results).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _locomo_data import Turn
from _prototype import memory_value
from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import Embedder
from confide.engine import MemoryEngine
from confide.retrieval.query import QueryPlan, retrieve
from confide.retrieval.ranking import RankingWeights
from confide.retrieval.source import StorageCandidateSource
from confide.storage import FEATURES
from confide.storage.base import Storage
from confide.storage.keystore import open_key_store
from confide.types import MemoryFilter

ACCOUNT = "locomo"


POSTGRES_SETTINGS = {"shared_buffers": "2GB"}
"""The bench server's memory, as a deployment would size it (the default of 128 MB holds
neither the HNSW index nor the rows at 100k memories; this machine has 24 GB)."""


def open_storage(backend: str, folder: Path, *, pool_max: int = 8) -> tuple[Storage, Any]:
    """A fresh migrated storage under ``folder`` and whatever must be stopped afterwards."""
    if backend == "sqlite":
        from confide.storage.sqlite import SqliteStorage

        sqlite = SqliteStorage(folder / "confide.db", features=FEATURES)
        sqlite.migrate()
        return sqlite, None
    from confide.storage.postgres import PostgresStorage
    from confide.testing.postgres import EmbeddedPostgres

    server = EmbeddedPostgres(folder / "pg", settings=POSTGRES_SETTINGS)
    # CONFIDE_POSTGRES_EF_SEARCH applies here as in a deployment.
    ef_search = Settings(home=folder / "home").postgres_ef_search
    postgres = PostgresStorage(
        server.create_database("bench"), max_size=pool_max, ef_search=ef_search, features=FEATURES
    )
    postgres.migrate()
    return postgres, server


@contextmanager
def bench_storage(backend: str, folder: Path, *, pool_max: int = 8) -> Iterator[Storage]:
    """:func:`open_storage`, closed (and its server stopped) on exit."""
    storage, server = open_storage(backend, folder, pool_max=pool_max)
    try:
        yield storage
    finally:
        storage.close()
        if server is not None:
            server.stop()


BENCH_KEK = bytes(range(32))
"""The fixed key-encryption key of :func:`bench_engine` (bench stores are thrown away)."""


@contextmanager
def bench_engine(backend: str, *, prefix: str, pool_max: int = 8) -> Iterator[MemoryEngine]:
    """An engine over a fresh store of ``backend`` in a temporary folder named ``prefix...``,
    with its owner keys in a SQLite key store beside it and :data:`BENCH_KEK`; on exit the
    engine's queued events are written, the key store closed, the store closed (its server
    stopped) and the folder removed.

    The engine's settings have the folder's ``home`` and the KEK as encryption key.
    """
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        bench_storage(backend, Path(tmp), pool_max=pool_max) as storage,
    ):
        folder = Path(tmp)
        keys = open_key_store(f"sqlite:///{folder / 'keys.db'}")
        settings = Settings(home=folder / "home", encryption_key=BENCH_KEK.hex())
        engine = MemoryEngine(
            storage, KeyRing(primary=BENCH_KEK), settings=settings, key_store=keys
        )
        try:
            yield engine
        finally:
            engine.ops.close()  # its queued events written while the store is still open
            keys.close()


def pct_ms(samples: Sequence[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``samples`` in seconds, in milliseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def settle(storage: Storage) -> None:
    """Bring a store just bulk-loaded to the state a deployment is in between imports.

    Fresh planner statistics on both backends; on SQLite the WAL folded into the database
    (otherwise the background checkpoint of the whole load runs during timed queries); on
    PostgreSQL a vacuum, which sets the visibility map that index-only reads rely on and
    leaves autovacuum nothing to do during timed queries (it would otherwise start on the
    freshly loaded tables, on the same cores), then a checkpoint, so the load's dirty pages
    are not written out by a timed checkpoint in the middle of the queries.
    """
    from confide.storage.postgres import PostgresStorage
    from confide.storage.sqlite import SqliteStorage

    if isinstance(storage, PostgresStorage):
        import psycopg

        with psycopg.connect(storage.conninfo, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")
            conn.execute("CHECKPOINT")
        return
    with storage.transaction() as tx:
        tx.run("ANALYZE")
    if isinstance(storage, SqliteStorage):
        storage.checkpoint()


def turn_memory(conv_id: str, turn: Turn) -> dict[str, Any]:
    """A dialogue turn as the memory the harness stores for user ``conv_id`` (an episodic
    memory with the speaker, date and dialogue id in its metadata, the session its run)."""
    return {
        "account_id": ACCOUNT,
        "user_id": conv_id,
        "key": f"turn_{turn.dia_id.replace(':', '_').lower()}",
        "value": memory_value(turn),
        "type": "episodic",
        "run_id": f"{conv_id}-s{turn.session}",
        "metadata": {
            "speaker": turn.speaker,
            "occurred_at": turn.date.isoformat(),
            "dia_id": turn.dia_id,
        },
    }


class EngineSide:
    """Ingest turns with ``store_many``; answer questions with hybrid retrieval."""

    def __init__(
        self,
        backend: str,
        embedder: Embedder,
        *,
        weights: RankingWeights | None = None,
        plan: QueryPlan | None = None,
        link_top_k: int = 5,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"confide-locomo-{backend}-")
        folder = Path(self._tmp.name)
        self.storage, self._server = open_storage(backend, folder)
        settings = Settings(
            home=folder / "home", encryption_key=os.urandom(32).hex(), link_top_k=link_top_k
        )
        engine = MemoryEngine(self.storage, KeyRing(primary=os.urandom(32)), settings=settings)
        self.app = Confide(engine, embedder=embedder, settings=settings)
        self.embedder = embedder
        # The run's CONFIDE_RANKING__* settings unless the caller gives weights.
        self.weights = weights or settings.ranking
        self.plan = plan or QueryPlan()

    def ingest(self, conv_id: str, turns: Sequence[Turn]) -> None:
        """One ``store_many`` per session, turns in order."""
        sessions: dict[int, list[Turn]] = {}
        for turn in turns:
            sessions.setdefault(turn.session, []).append(turn)
        for session in sessions.values():
            self.app.engine.store_many([turn_memory(conv_id, turn) for turn in session])

    def query(self, conv_id: str, question: str, k: int) -> list[str]:
        """Dialogue ids of the top ``k`` memories."""
        source = StorageCandidateSource(
            self.app.engine, MemoryFilter(account_id=ACCOUNT, user_id=conv_id)
        )
        ranked = retrieve(
            source,
            question,
            embedder=self.embedder,
            limit=k,
            weights=self.weights,
            plan=self.plan,
        )
        memories = source.load([s.candidate.id for s in ranked])
        return [str(memories[s.candidate.id].metadata["dia_id"]) for s in ranked]

    def close(self) -> None:
        """Stop the database and remove its files."""
        self.app.close()
        if self._server is not None:
            self._server.stop()
        self._tmp.cleanup()
