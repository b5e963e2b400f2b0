"""Lists over a large owner's vectors: every row in one list with its own bits, and a search
through them answering as the full pass does when it reads every list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.index.memory_text import indexed_text
from confide.index.vectors import VectorIndexer
from confide.storage import FEATURES
from confide.storage.base import ScoredId
from confide.storage.sqlite import SqliteStorage
from confide.storage.sqlite_vectors import SqliteVectorIndex, _OwnerIndex, pack_signs
from confide.storage.vector_kernels import hamming_distances
from confide.storage.vector_partition import build_partition, list_count
from confide.testing.builders import ACCOUNT
from confide.testing.conformance.harness import TEST_KEK
from confide.testing.embedders import HashingEmbedder
from confide.types import Memory, MemoryFilter

pytestmark = pytest.mark.usefixtures("kernels")  # each test with NumPy's loops and numba's

MINE = MemoryFilter(account_id=ACCOUNT, user_id="user-1")


def _clustered(rng: np.random.Generator, rows: int, centres: int = 12) -> np.ndarray:
    middle = rng.standard_normal((centres, 384)).astype(np.float32)
    vectors = middle[rng.integers(0, centres, rows)]
    vectors += 0.2 * rng.standard_normal(vectors.shape).astype(np.float32)
    unit: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def _index(vectors: np.ndarray) -> _OwnerIndex:
    index = _OwnerIndex()
    index.append([f"m{i}" for i in range(len(vectors))], vectors)
    return index


def test_every_row_is_in_exactly_one_list_with_its_own_bits() -> None:
    index = _index(_clustered(np.random.default_rng(1), 500))
    partition = build_partition(index.codes, index.scales, index.bits, lists=8)
    assert partition.covered == 500 and partition.lists == 8
    assert sorted(partition.rows.tolist()) == list(range(500))
    assert partition.starts[0] == 0 and partition.starts[-1] == 500
    assert np.all(np.diff(partition.starts) >= 0)
    for c in range(partition.lists):
        first, last = int(partition.starts[c]), int(partition.starts[c + 1])
        block = partition.bits[first * partition.words : last * partition.words]
        expected = index.bits[:, partition.rows[first:last]]
        assert np.array_equal(block.reshape(partition.words, last - first), expected)


def test_rows_are_listed_by_their_nearest_centroid() -> None:
    index = _index(_clustered(np.random.default_rng(2), 400))
    partition = build_partition(index.codes, index.scales, index.bits, lists=6)
    vectors = index.codes.astype(np.float32) * index.scales[:, None]
    nearest = np.argmax(vectors @ partition.centroids.T, axis=1)
    for c in range(partition.lists):
        members = partition.rows[partition.starts[c] : partition.starts[c + 1]]
        assert np.all(nearest[members] == c)
    assert np.allclose(np.linalg.norm(partition.centroids, axis=1), 1.0, atol=1e-5)


def test_reading_every_list_gives_every_row_and_the_tail_its_distance() -> None:
    rng = np.random.default_rng(3)
    vectors = _clustered(rng, 330)
    index = _index(vectors[:300])
    partition = build_partition(index.codes, index.scales, index.bits, lists=7)
    index.append([f"n{i}" for i in range(30)], vectors[300:])
    query = vectors[17]
    query_bits = pack_signs(query[None, :])[0]
    rows, distance = partition.candidates(index.bits, query, query_bits, partition.lists)
    assert sorted(rows.tolist()) == list(range(330))
    expected = hamming_distances(index.bits, query_bits)
    assert np.array_equal(distance, expected[rows])


def test_a_search_reads_the_lists_of_the_highest_centroid_scores() -> None:
    index = _index(_clustered(np.random.default_rng(4), 300))
    partition = build_partition(index.codes, index.scales, index.bits, lists=9)
    query = index.codes[5].astype(np.float32) * index.scales[5]
    chosen = partition.nearest_lists(query, 3)
    scores = partition.centroids @ query
    assert sorted(chosen.tolist()) == sorted(np.argsort(-scores)[:3].tolist())
    rows, distance = partition.candidates(index.bits, query, pack_signs(query[None, :])[0], 3)
    assert (
        len(rows)
        == len(distance)
        == sum(int(partition.starts[c + 1] - partition.starts[c]) for c in chosen)
    )


def test_lists_grow_as_the_square_root_of_the_rows() -> None:
    assert list_count(1) == 1
    assert list_count(250_000) == 500
    assert list_count(1_000_000) == 1000


@pytest.fixture
def engine(tmp_path: Path, settings: Settings) -> Iterator[MemoryEngine]:
    storage = SqliteStorage(str(tmp_path / "confide.db"), features=FEATURES)
    storage.migrate()
    engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK), settings=settings)
    engine.add_indexer(VectorIndexer(storage, HashingEmbedder(), link_top_k=0))
    yield engine
    engine.close()


def _vector_index(engine: MemoryEngine) -> SqliteVectorIndex:
    storage = engine.storage
    assert isinstance(storage, SqliteStorage)
    return storage.vector_index


def _fill(engine: MemoryEngine, count: int, start: int = 0) -> list[Memory]:
    return engine.store_many(
        [
            {
                "account_id": ACCOUNT,
                "user_id": "user-1",
                "key": f"note{i}",
                "value": f"item {i} of {i % 13} with {i % 7} and {i % 5}",
            }
            for i in range(start, start + count)
        ]
    )


def _search(engine: MemoryEngine, memory: Memory, k: int = 5) -> list[ScoredId]:
    query = HashingEmbedder().embed_one(indexed_text(memory))
    return engine.storage.vector_search(MINE, query, k)


def _partitioned(engine: MemoryEngine, rows: int) -> SqliteVectorIndex:
    """The engine's index set to partition from ``rows`` rows, with a shortlist small enough
    that a search of a few hundred rows is not a full one."""
    index = _vector_index(engine)
    index.partition_rows, index.shortlist, index.shortlist_share = rows, 24, 0.0
    return index


def _partition_of(index: SqliteVectorIndex) -> int:
    """Rows the user's partition covers (0 for none)."""
    owned = index._owners[(ACCOUNT, "user-1")]
    return owned.partition.covered if owned.partition is not None else 0


def test_reading_every_list_answers_as_the_full_pass(engine: MemoryEngine) -> None:
    memories = _fill(engine, 400)
    index = _partitioned(engine, 500)
    index.probe_share = 1.0
    asked = memories[::37]
    before = [_search(engine, m) for m in asked]
    index.flush()
    assert _partition_of(index) == 0
    index.partition_rows = 300
    _search(engine, memories[0])  # hands the build on
    index.flush()
    assert _partition_of(index) == 400
    after = [_search(engine, m) for m in asked]
    assert [[(h.memory_id, round(h.score, 5)) for h in hits] for hits in after] == [
        [(h.memory_id, round(h.score, 5)) for h in hits] for hits in before
    ]
    assert all(len(hits) == 5 for hits in after)


def test_rows_past_the_partition_are_read_until_it_is_built_again(engine: MemoryEngine) -> None:
    _fill(engine, 400)
    index = _partitioned(engine, 300)
    index.probe_share = 0.05  # one list of twenty
    index.partition_share = 0.05
    _search(engine, _fill(engine, 1, start=400)[0])
    index.flush()
    assert _partition_of(index) == 401
    later = _fill(engine, 20, start=401)  # 20 new rows: within 5% of 401, no new build
    for memory in later:
        assert _search(engine, memory, 1)[0].memory_id == memory.id
    index.flush()
    assert _partition_of(index) == 401
    newest = _fill(engine, 1, start=421)[0]  # 21 past it: more than 5%
    assert _search(engine, newest, 1)[0].memory_id == newest.id
    index.flush()
    assert _partition_of(index) == 422


def test_a_forgotten_memory_is_not_found_through_the_partition(engine: MemoryEngine) -> None:
    memories = _fill(engine, 400)
    index = _partitioned(engine, 300)
    _search(engine, memories[0])
    index.flush()
    assert _partition_of(index) == 400
    gone = memories[123]
    assert _search(engine, gone, 1)[0].memory_id == gone.id
    engine.forget(gone.id, account_id=ACCOUNT)
    assert gone.id not in [h.memory_id for h in _search(engine, gone, 10)]


def test_a_small_owner_is_never_partitioned(engine: MemoryEngine) -> None:
    memories = _fill(engine, 50)
    index = _vector_index(engine)
    _search(engine, memories[0])
    index.flush()
    assert _partition_of(index) == 0
    assert index.partition_rows == 250_000
