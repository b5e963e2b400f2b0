"""Crashes: ``kill -9`` of ``confide serve`` and its background worker during concurrent
writes, on both backends (SQLite: the service's worker thread; PostgreSQL: an ``confide
worker`` process beside it).

After each restart the store passes its integrity check and the consistency queries; at the
end every acknowledged write reads back as sent, and the worker that starts last finishes
every job the killed ones held, none with its effect twice. ``bench/crash.py`` runs the full
size (ten kills of 1,000 writes per backend).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import open_storage
from confide.storage.base import Storage
from confide.storage.keystore import open_key_store
from confide.testing.builders import add
from confide.testing.crash import Ack, check_store, crash_rounds, values_in_clear
from confide.testing.postgres import EmbeddedPostgres, create_schema
from confide.testing.processes import confide_env

try:  # Confide's own SQLite library: a second copy in one process breaks its file locks
    import pysqlite3.dbapi2 as sqlite3
except ImportError:  # pragma: no cover - platforms without the wheel
    import sqlite3

KEY = "55" * 32


@pytest.fixture(params=["sqlite", "postgres"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A fresh store and its key store, once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'confide.db'}", f"sqlite:///{tmp_path / 'keys.db'}"
    server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
    data = server.temporary_database(request, template="confide_template")
    return data, create_schema(request.getfixturevalue("keys_database"))


@pytest.mark.slow
def test_kill_9_of_service_and_worker_loses_no_write_and_strands_no_job(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    data, keys = urls
    settings = Settings(
        home=tmp_path / "home", storage_url=data, keystore_url=keys, encryption_key=KEY
    )
    env = confide_env(
        {
            "CONFIDE_HOME": str(tmp_path / "home"),
            "CONFIDE_STORAGE_URL": data,
            "CONFIDE_KEYSTORE_URL": keys,
            "MEMORY_ENCRYPTION_KEY": KEY,
        }
    )
    report = crash_rounds(
        settings=settings, env=env, rounds=2, writes=200, concurrency=20, worker=True
    )
    assert report.errors == []
    assert len(report.rounds) == 2 and all(r.lost_in_flight > 0 for r in report.rounds)
    assert [c.integrity for c in report.checks] == [[], []]
    assert [c.orphaned for c in report.checks] == [0, 0], [c.orphans for c in report.checks]
    # Vectors were checked too: the service embeds with the local model.
    assert "active_memories_without_vector" in report.checks[-1].orphans
    assert report.acknowledged >= 40
    assert report.present == report.acknowledged
    # Sentinels: no acknowledged value readable in any file of the store or key store (WAL too).
    assert report.values_in_clear == 0
    # The worker died with the service each time, mid-way through its TTL work.
    assert report.worker_kills == 2
    queue = report.queue
    assert queue is not None
    assert queue.due >= 3  # each round's first jobs, and the final sweep
    assert (queue.stranded, queue.failed, queue.ttl_twice, queue.fading_not_retired) == (
        0,
        0,
        0,
        0,
    )
    # A job a killed worker held was claimed again once its lease expired, and finished.
    assert queue.rerun >= report.jobs_held
    fading = sum(1 for r in report.rounds for a in r.acks if a.fading)
    assert fading > 0 and queue.retired >= fading


_STRAY_TOKEN = (
    "INSERT INTO memory_tokens (account_id, user_id, token, memory_id, tf, doc_len) "
    "VALUES ('a', 'u', 1, 'gone', 1, 1)"
)


def _sql(storage: Storage, statement: str) -> None:
    with storage.transaction() as tx:
        tx.run(statement)


def test_the_check_counts_what_a_broken_write_would_leave(storage_url: str, tmp_path: Path) -> None:
    keys = (
        f"sqlite:///{tmp_path / 'keys.db'}"
        if storage_url.startswith("sqlite")
        else create_schema(storage_url, prefix="crashkeys")
    )
    storage = open_storage(storage_url, pool_max=2)
    key_store = open_key_store(keys)
    try:
        engine = MemoryEngine(storage, KeyRing(primary=bytes.fromhex(KEY)), key_store=key_store)
        kept, broken = add(engine, key="kept"), add(engine, key="broken", value="broken write")
        clean = check_store(storage_url, keys)
        assert clean.integrity == [] and clean.orphaned == 0 and clean.unused_keys == 0
        # What a write committed in pieces would leave: a memory without its history or
        # search terms, and search terms of a memory that is not there.
        _sql(storage, f"DELETE FROM history WHERE memory_id = '{broken.id}'")
        _sql(storage, f"DELETE FROM memory_tokens WHERE memory_id = '{kept.id}'")
        # Past the foreign key, as a store without one (or a bug writing around it) would.
        if storage_url.startswith("sqlite:///"):
            # A plain connection does not enforce foreign keys.
            raw = sqlite3.connect(storage_url.removeprefix("sqlite:///"))
            with raw:
                raw.execute(_STRAY_TOKEN)
            raw.close()
        else:
            with storage.transaction() as tx:
                tx.run("SET LOCAL session_replication_role = replica")
                tx.run(_STRAY_TOKEN)
    finally:
        key_store.close()
        storage.close()
    found = check_store(storage_url, keys)
    assert found.orphans["memories_without_history"] == 1
    assert found.orphans["active_memories_without_tokens"] == 1
    assert found.orphans["tokens_without_memory"] == 1
    assert found.orphaned == 3


def test_the_sentinel_scan_finds_a_value_written_in_clear(storage_url: str, tmp_path: Path) -> None:
    keys = (
        f"sqlite:///{tmp_path / 'keys.db'}"
        if storage_url.startswith("sqlite")
        else create_schema(storage_url, prefix="crashkeys")
    )
    sealed = Ack("m1", "Round s1 note 1: the canal by the meadow opens at 6 every Friday.")
    leaked = Ack("m2", "Round s1 note 2: the violin by the garden opens at 9 every Sunday.")
    storage = open_storage(storage_url, pool_max=2)
    key_store = open_key_store(keys)
    try:
        engine = MemoryEngine(storage, KeyRing(primary=bytes.fromhex(KEY)), key_store=key_store)
        add(engine, key="sealed", value=sealed.value)
        # What a store that kept a value in clear would hold (a column outside the seal).
        engine.set_meta_value("leak", leaked.value)
        if not storage_url.startswith("sqlite:///"):
            _sql(storage, "CHECKPOINT")  # the relation's pages reach their files
    finally:
        key_store.close()
        storage.close()
    assert values_in_clear(storage_url, keys, [sealed, leaked]) == 1


def test_the_sentinel_scan_reads_a_dump_where_postgresql_compressed_the_value(
    storage_url: str,
) -> None:
    if storage_url.startswith("sqlite"):
        pytest.skip("PostgreSQL compresses long values (TOAST); SQLite stores them as written")
    keys = create_schema(storage_url, prefix="crashkeys")
    leaked = Ack("m3", "Round s1 note 3: the harbour by the lantern opens at 7 every Monday.")
    storage = open_storage(storage_url, pool_max=2)
    key_store = open_key_store(keys)
    try:
        # A long, repetitive column is compressed in the relation's files, so the value is
        # not in clear there; a backup made with pg_dump holds it as written.
        engine = MemoryEngine(storage, KeyRing(primary=bytes.fromhex(KEY)), key_store=key_store)
        engine.set_meta_value("leak", leaked.value + " and so on" * 400)
        _sql(storage, "CHECKPOINT")
    finally:
        key_store.close()
        storage.close()
    assert values_in_clear(storage_url, keys, [leaked]) == 1
