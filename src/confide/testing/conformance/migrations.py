"""Migrations: a database made by an older schema version upgrades in place."""

from __future__ import annotations

import pytest

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import migrations
from confide.storage.base import Capability, Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import (
    TEST_KEK,
    StorageHarness,
    latest_versions,
    unrecord_steps,
)


class MigrationsConformance(StorageHarness):
    """A store made by an older schema version upgrades in place."""

    def test_older_database_upgrades_and_keeps_data(
        self, storage: Storage, monkeypatch: object
    ) -> None:
        # Roll the fresh database back to the memory store's first step, as an older Confide
        # left it.
        with storage.database.transaction() as tx:
            tx.across_accounts()
            tx.run("DELETE FROM feature_migrations WHERE feature <> 'memories' OR version > 1")
            tx.run("DROP TABLE IF EXISTS embeddings")
        assert storage.schema_versions() == {"memories": 1}
        engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK))
        memory = add(engine, value="kept across the upgrade")
        storage.migrate()
        assert storage.schema_versions() == latest_versions()
        assert engine.get(memory.id, account_id=ACCOUNT).value == "kept across the upgrade"
        storage.bind_embedder("test-model", 8)
        assert storage.embedder_spec() == "test-model:8"

    @pytest.mark.requires(Capability.HNSW)
    def test_vector_graph_takes_the_current_build_settings(self, storage: Storage) -> None:
        storage.bind_embedder("test-model", 8)
        # As a store made before the hnsw-graph step left it: a graph built with pgvector's
        # default.
        with storage.database.transaction() as tx:
            tx.run("DROP INDEX embeddings_hnsw")
            tx.run(
                "CREATE INDEX embeddings_hnsw ON embeddings USING hnsw "
                "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
        unrecord_steps(storage, "memories", version=3, and_later=True)
        graph = "SELECT reloptions, relfilenode FROM pg_class WHERE relname = 'embeddings_hnsw'"
        with storage.database.transaction() as tx:
            before = tx.run(graph).fetchone()
        storage.migrate()
        with storage.database.transaction() as tx:
            after = tx.run(graph).fetchone()
        assert f"ef_construction={migrations.HNSW_EF_CONSTRUCTION}" in after[0]
        # A settings change, not a rebuild: the graph's storage is the one it had.
        assert after[1] == before[1]

    def test_row_versions_are_added_to_existing_rows(self, storage: Storage) -> None:
        engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK))
        memory = add(engine)
        # As a store made before the row-version step left it: no row versions.
        with storage.database.transaction() as tx:
            tx.run("ALTER TABLE memories DROP COLUMN row_version")
        unrecord_steps(storage, "memories", version=5)
        storage.migrate()
        assert engine.get(memory.id, account_id=ACCOUNT).row_version == 1
        assert engine.forget(memory.id, account_id=ACCOUNT).row_version == 2
        # Run again after its record was lost, it finds the column and leaves it as it is.
        unrecord_steps(storage, "memories", version=5)
        storage.migrate()
        assert storage.schema_versions() == latest_versions()
        assert engine.get(memory.id, account_id=ACCOUNT).row_version == 2

    def test_a_store_without_read_positions_delivers_headers_after_upgrade(
        self, storage: Storage
    ) -> None:
        engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK))
        add(engine, key="city", value="Lima")
        # As a store made before the thread-reads step left it: no read positions.
        with storage.database.transaction() as tx:
            tx.run("DROP TABLE thread_reads")
        unrecord_steps(storage, "memories", version=11)
        storage.migrate()
        deliver = {"account_id": ACCOUNT, "user_id": "user-1", "reader": "default"}
        assert engine.deliver_delta(**deliver) == (
            "Memory updates since rev 0:\n- +created: [Fact] City is Lima (imp=2)"
        )
        assert engine.deliver_delta(**deliver) == ""
