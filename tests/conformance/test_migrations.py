"""Migrations: a database made by an older schema version upgrades in place."""

from __future__ import annotations

from engram.crypto.keyring import KeyRing
from engram.engine import MemoryEngine
from engram.storage import migrations
from engram.storage.base import Storage
from engram.testing.builders import ACCOUNT, add

TEST_KEK = bytes(range(32))


def test_older_database_upgrades_and_keeps_data(storage: Storage, monkeypatch: object) -> None:
    # Roll the fresh database back to schema version 1, as an older Engram left it.
    with storage.transaction() as tx:
        tx.run("DELETE FROM schema_migrations WHERE version > 1")  # type: ignore[attr-defined]
        if tx.has_table("embeddings"):  # type: ignore[attr-defined]
            tx.run("DROP TABLE embeddings")  # type: ignore[attr-defined]
    assert storage.schema_version() == 1
    engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK))
    memory = add(engine, value="kept across the upgrade")
    storage.migrate()
    assert storage.schema_version() == max(m.version for m in migrations.MIGRATIONS)
    assert engine.get(memory.id, account_id=ACCOUNT).value == "kept across the upgrade"
    storage.bind_embedder("test-model", 8)
    assert storage.embedder_spec() == "test-model:8"
