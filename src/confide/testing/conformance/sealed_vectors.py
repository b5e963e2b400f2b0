"""Embeddings sealed at rest where the vector search runs in process (SQLite).

A vector is the one derived form of a value that embedding inversion can turn back into an
approximation of the text, so a store that searches vectors in process keeps them sealed
under the owner's key: nothing of a vector is in its files, a vector moved to another row
or user does not open, and an erasure (destroying the key) makes every copy unreadable.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.index.memory_text import indexed_text
from confide.index.vectors import VectorIndexer
from confide.storage import open_storage
from confide.storage.base import Capability, Storage
from confide.storage.keystore import KeyStore
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import TEST_KEK, StorageHarness, unrecord_steps
from confide.testing.embedders import HashingEmbedder
from confide.types import Memory, MemoryFilter

MINE = MemoryFilter(account_id=ACCOUNT, user_id="user-1")


def _vectors(engine: MemoryEngine) -> HashingEmbedder:
    embedder = HashingEmbedder()
    engine.add_indexer(VectorIndexer(engine.storage, embedder, link_top_k=0))
    return embedder


def _embedding_rows(storage: Storage) -> list[tuple[str, str | None, bytes]]:
    with storage.database.reader_across_accounts() as db:
        rows = db.run("SELECT memory_id, key_id, vector FROM embeddings ORDER BY seq").fetchall()
    return [(str(r[0]), r[1], bytes(r[2])) for r in rows]


def _reopened(storage: Storage, url: str, key_store: KeyStore, settings: Settings) -> MemoryEngine:
    """A second engine on ``url`` (a cold vector index), its vectors opened by its own keys."""
    engine = MemoryEngine(
        open_storage(url), KeyRing(primary=TEST_KEK), settings=settings, key_store=key_store
    )
    engine.add_indexer(VectorIndexer(engine.storage, HashingEmbedder(), link_top_k=0))
    return engine


class SealedVectorsConformance(StorageHarness):
    """Stored vectors are sealed under their owner's key and open only where they belong."""

    @pytest.mark.requires(Capability.SEALED_VECTORS, Capability.DATA_FILES)
    def test_no_vector_in_clear_in_the_files(self, engine: MemoryEngine, storage: Storage) -> None:
        embedder = _vectors(engine)
        memory = add(engine, value="the blue lagoon at dawn")
        expected = embedder.embed_one(indexed_text(memory))
        rows = _embedding_rows(storage)
        assert [(m, k is not None) for m, k, _ in rows] == [(memory.id, True)]
        storage.scrub()
        files = b"".join(p.read_bytes() for p in storage.data_files() if p.exists())
        assert expected.astype(np.float32).tobytes() not in files
        hits = storage.vector_search(MINE, expected, 3)
        assert [h.memory_id for h in hits] == [memory.id]
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    @pytest.mark.requires(Capability.SEALED_VECTORS)
    def test_a_vector_moved_to_another_row_or_user_does_not_open(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store: KeyStore,
        settings: Settings,
    ) -> None:
        embedder = _vectors(engine)
        first = add(engine, key="a", value="a red kite over the hill")
        second = add(engine, key="b", value="a grey heron by the pond")
        theirs = add(engine, key="c", value="a green parrot indoors", user_id="user-2")
        untouched = add(engine, key="d", value="a white owl in the barn")
        blobs = {m: (k, v) for m, k, v in _embedding_rows(storage)}
        with storage.database.transaction() as tx:
            # Swap two rows' sealed vectors, and give user-1 a row sealed for user-2.
            for target, source in ((first.id, second.id), (second.id, first.id)):
                tx.run(
                    "UPDATE embeddings SET vector = ? WHERE memory_id = ?",
                    [blobs[source][1], target],
                )
            tx.run("UPDATE embeddings SET user_id = 'user-1' WHERE memory_id = ?", [theirs.id])
        cold = _reopened(storage, storage_url, key_store, settings)
        try:
            found = set()
            for memory in (first, second, theirs, untouched):
                query = embedder.embed_one(indexed_text(memory))
                found |= {h.memory_id for h in cold.storage.vector_search(MINE, query, 10)}
            assert found == {untouched.id}
            assert cold.integrity_failures == 3
        finally:
            cold.close()

    @pytest.mark.requires(Capability.SEALED_VECTORS, Capability.DATA_FILES)
    def test_a_copy_taken_before_erasure_opens_no_vector(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store: KeyStore,
        settings: Settings,
        tmp_path: Path,
    ) -> None:
        embedder = _vectors(engine)
        erased = add(engine, value="my secret garden gate code")
        kept = add(engine, value="my secret garden gate code", user_id="user-2")
        storage.scrub()
        original = Path(storage_url.removeprefix("sqlite:///"))
        copy = tmp_path / "copy.db"
        shutil.copyfile(original, copy)
        engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        thief = _reopened(storage, f"sqlite:///{copy}", key_store, settings)
        try:
            query = embedder.embed_one(indexed_text(erased))
            # The copy still has the rows, but nothing of the erased user opens.
            assert thief.storage.count_rows("embeddings", ACCOUNT, "user-1") == 1
            assert thief.storage.vector_search(MINE, query, 5) == []
            assert thief.list_memories(MINE) == []
            theirs = MemoryFilter(account_id=ACCOUNT, user_id="user-2")
            assert [h.memory_id for h in thief.storage.vector_search(theirs, query, 5)] == [kept.id]
        finally:
            thief.close()

    @pytest.mark.requires(Capability.SEALED_VECTORS)
    def test_vectors_of_an_older_store_are_sealed_when_it_is_opened(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store: KeyStore,
        settings: Settings,
    ) -> None:
        embedder = HashingEmbedder()
        memory: Memory = add(engine, value="an old memory from before sealing")
        storage.bind_embedder(embedder.model_id, embedder.dims)
        vector = embedder.embed_one(indexed_text(memory))
        unrecord_steps(storage, "memories", version=12, and_later=True)
        with storage.database.transaction() as tx:  # as the schema before sealed vectors was
            for statement in (
                "DROP INDEX embeddings_clear",
                "ALTER TABLE embeddings DROP COLUMN key_id",
            ):
                tx.run(statement)
            tx.run(
                "INSERT INTO embeddings (memory_id, account_id, user_id, model_id, vector) "
                "VALUES (?, ?, ?, ?, ?)",
                [memory.id, ACCOUNT, "user-1", embedder.model_id, vector.tobytes()],
            )
        storage.migrate()
        assert [k for _, k, _ in _embedding_rows(storage)] == [None]
        upgraded = _reopened(storage, storage_url, key_store, settings)
        try:
            [(stored_id, key_id, blob)] = _embedding_rows(storage)
            assert stored_id == memory.id
            assert key_id is not None and blob != vector.astype(np.float32).tobytes()
            hits = upgraded.storage.vector_search(MINE, vector, 3)
            assert [h.memory_id for h in hits] == [memory.id]
        finally:
            upgraded.close()
