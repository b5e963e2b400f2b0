"""Snapshots of a user's in-process vector index, sealed like the vectors (SQLite).

A cold process loads a large user's index from one sealed snapshot plus the rows stored
after it, instead of opening and quantising every row. The snapshot must answer as the rows
would (later rows, replaced and deleted vectors included), open only for its owner, and
become unreadable with the rest of the user on erasure, also in a copy taken before.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol, runtime_checkable

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.index.memory_text import indexed_text
from confide.index.vectors import VectorIndexer
from confide.storage import open_storage
from confide.storage.base import Capability
from confide.storage.keystore import KeyStore
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import TEST_KEK, StorageHarness
from confide.testing.embedders import HashingEmbedder
from confide.types import Memory, MemoryFilter

MINE = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
THEIRS = MemoryFilter(account_id=ACCOUNT, user_id="user-2")
WORDS = ("kite", "heron", "parrot", "owl", "lagoon", "garden", "harbour", "meadow", "lantern")


class _SnapshottingIndex(Protocol):
    """The in-process index of a storage with sealed vectors, as these tests tune it."""

    snapshot_rows: int
    snapshot_share: float

    def flush(self) -> None:
        """Wait for the snapshots being written in the background."""
        ...


@runtime_checkable
class _InProcessVectors(Protocol):
    @property
    def vector_index(self) -> _SnapshottingIndex:
        """The storage's in-process vector index."""
        ...


def _index(engine: MemoryEngine) -> _SnapshottingIndex:
    """The engine's in-process vector index (a storage with sealed vectors keeps one)."""
    storage = engine.storage
    assert isinstance(storage, _InProcessVectors), f"{storage.name} keeps no in-process index"
    return storage.vector_index


def _vectors(engine: MemoryEngine) -> MemoryEngine:
    """``engine`` with a vector indexer, its index snapshotted after every 4 new rows."""
    engine.add_indexer(VectorIndexer(engine.storage, HashingEmbedder(), link_top_k=0))
    _index(engine).snapshot_rows = 4
    return engine


def _engine(url: str, key_store: KeyStore, settings: Settings) -> MemoryEngine:
    """A second engine on ``url`` (a cold vector index), with its own keys."""
    engine = MemoryEngine(
        open_storage(url), KeyRing(primary=TEST_KEK), settings=settings, key_store=key_store
    )
    return _vectors(engine)


def _fill(engine: MemoryEngine, user_id: str, count: int, start: int = 0) -> list[Memory]:
    return [
        add(
            engine,
            key=f"k{i}",
            value=f"{WORDS[i % len(WORDS)]} number {i} by the {WORDS[(i * 3) % len(WORDS)]}",
            user_id=user_id,
        )
        for i in range(start, start + count)
    ]


def _snapshot(engine: MemoryEngine, flt: MemoryFilter) -> int:
    """Load the owner's index (a search) and wait for its snapshot; returns its ``max_seq``."""
    engine.storage.vector_search(flt, HashingEmbedder().embed_one("kite"), 1)
    _index(engine).flush()
    with engine.storage.database.reader_across_accounts() as db:
        row = db.run(
            "SELECT max_seq FROM vector_snapshots WHERE account_id = ? AND user_id = ?",
            [flt.account_id, flt.user_id],
        ).fetchone()
    return int(row[0]) if row else 0


def _snapshots_of(engine: MemoryEngine, user_id: str) -> int:
    with engine.storage.database.reader_across_accounts() as db:
        row = db.run(
            "SELECT COUNT(*) FROM vector_snapshots WHERE account_id = ? AND user_id = ?",
            [ACCOUNT, user_id],
        ).fetchone()
    return int(row[0])


def _top(engine: MemoryEngine, flt: MemoryFilter, memory: Memory, k: int = 3) -> list[str]:
    query = HashingEmbedder().embed_one(indexed_text(memory))
    return [h.memory_id for h in engine.storage.vector_search(flt, query, k)]


class IndexSnapshotsConformance(StorageHarness):
    """A sealed index snapshot answers as the rows do, for its owner only, until erasure."""

    @pytest.mark.requires(Capability.SEALED_VECTORS)
    def test_a_cold_load_from_the_snapshot_answers_as_the_rows_do(
        self, engine: MemoryEngine, storage_url: str, key_store: KeyStore, settings: Settings
    ) -> None:
        warm = _vectors(engine)
        memories = _fill(warm, "user-1", 8)
        assert _snapshot(warm, MINE) > 0
        # After the snapshot: a new row, a new version of a memory, a soft deletion.
        later = _fill(warm, "user-1", 1, start=8)[0]
        updated = warm.update(memories[0].id, {"value": "a lantern"}, account_id=ACCOUNT)
        warm.forget(memories[1].id, account_id=ACCOUNT)
        expected = {m.id: _top(warm, MINE, m) for m in [*memories, later, updated]}
        cold = _engine(storage_url, key_store, settings)
        try:
            # Vectors the snapshot holds are not opened again: their rows may be unreadable.
            with cold.storage.database.transaction() as tx:
                tx.run(
                    "UPDATE embeddings SET vector = zeroblob(64) WHERE memory_id = ?",
                    [memories[5].id],
                )
            got = {m.id: _top(cold, MINE, m) for m in [*memories, later, updated]}
            assert got == expected
            assert cold.integrity_failures == 0
            assert _top(cold, MINE, later, 1) == [later.id]
            assert _top(cold, MINE, updated, 1) == [updated.id]
            assert all(memories[1].id not in ids for ids in got.values())
        finally:
            cold.close()

    @pytest.mark.requires(Capability.SEALED_VECTORS)
    def test_a_large_index_is_snapshotted_again_after_its_share_of_new_rows(
        self, engine: MemoryEngine
    ) -> None:
        # A rewrite costs the whole index: after a fixed count of rows, a large user would
        # rewrite it again and again; after a share of its size, the cost per row is bounded.
        warm = _vectors(engine)
        _index(warm).snapshot_share = 0.5
        _fill(warm, "user-1", 8)
        first = _snapshot(warm, MINE)
        assert first > 0
        _fill(warm, "user-1", 5, start=8)  # 5 new rows: more than 4, less than half of 13
        assert _snapshot(warm, MINE) == first
        _fill(warm, "user-1", 3, start=13)  # 8 new rows: half of 16
        assert _snapshot(warm, MINE) > first

    @pytest.mark.requires(Capability.SEALED_VECTORS)
    def test_a_snapshot_of_many_deleted_rows_is_not_used(
        self, engine: MemoryEngine, storage_url: str, key_store: KeyStore, settings: Settings
    ) -> None:
        warm = _vectors(engine)
        memories = _fill(warm, "user-1", 8)
        assert _snapshot(warm, MINE) > 0
        cold = _engine(storage_url, key_store, settings)
        try:
            gone = [m.id for m in memories[:4]]
            with cold.storage.database.transaction() as tx:  # vectors dropped, memories kept
                tx.run(
                    f"DELETE FROM embeddings WHERE memory_id IN ({', '.join('?' for _ in gone)})",
                    gone,
                )
            found = {h for m in memories for h in _top(cold, MINE, m, 8)}
            assert found == {m.id for m in memories[4:]}
        finally:
            cold.close()

    @pytest.mark.requires(Capability.SEALED_VECTORS)
    def test_a_snapshot_moved_to_another_user_does_not_open(
        self, engine: MemoryEngine, storage_url: str, key_store: KeyStore, settings: Settings
    ) -> None:
        warm = _vectors(engine)
        _fill(warm, "user-1", 8)
        theirs = _fill(warm, "user-2", 2)
        assert _snapshot(warm, MINE) > 0
        assert _snapshot(warm, THEIRS) == 0  # too few rows for a snapshot of its own
        cold = _engine(storage_url, key_store, settings)
        try:
            with cold.storage.database.transaction() as tx:
                tx.run("UPDATE vector_snapshots SET user_id = 'user-2' WHERE user_id = 'user-1'")
            found = {h for m in theirs for h in _top(cold, THEIRS, m, 10)}
            assert found == {m.id for m in theirs}
        finally:
            cold.close()

    @pytest.mark.requires(Capability.SEALED_VECTORS, Capability.DATA_FILES)
    def test_erasure_makes_the_snapshot_unreadable_also_in_a_copy(
        self,
        engine: MemoryEngine,
        storage_url: str,
        key_store: KeyStore,
        settings: Settings,
        tmp_path: Path,
    ) -> None:
        _vectors(engine)
        erased = _fill(engine, "user-1", 8)
        kept = _fill(engine, "user-2", 8)
        assert _snapshot(engine, MINE) > 0
        assert _snapshot(engine, THEIRS) > 0
        engine.storage.scrub()
        copy = tmp_path / "copy.db"
        shutil.copyfile(Path(storage_url.removeprefix("sqlite:///")), copy)
        engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert _snapshots_of(engine, "user-1") == 0
        thief = _engine(f"sqlite:///{copy}", key_store, settings)
        try:
            assert _snapshots_of(thief, "user-1") == 1
            assert all(_top(thief, MINE, m, 5) == [] for m in erased)
            assert _top(thief, THEIRS, kept[0], 1) == [kept[0].id]
        finally:
            thief.close()
