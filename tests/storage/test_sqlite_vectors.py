"""The SQLite backend's in-process vector index: shortlist by sign bits, int8 re-scoring."""

from __future__ import annotations

import numpy as np
import pytest

from confide.storage.sqlite_vectors import (
    SqliteVectorIndex,
    _OwnerIndex,
    _ranked,
    from_snapshot,
    nearest_by_bits,
    pack_signs,
    quantize,
    to_snapshot,
)

pytestmark = pytest.mark.usefixtures("kernels")  # each test with NumPy's loops and numba's


def _unit(rng: np.random.Generator, n: int, dims: int = 384) -> np.ndarray:
    v = rng.standard_normal((n, dims)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def _distances(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.bitwise_count(pack_signs(vectors) ^ pack_signs(q[None, :])).sum(axis=1)
    return out


def _assert_nearest_prefix(found: np.ndarray, distance: np.ndarray, count: int) -> None:
    assert len(found) >= count
    assert np.all(np.diff(found) > 0), "rows come back in row order, once each"
    worst = distance[found].max()
    assert set(np.flatnonzero(distance < worst)) <= set(found.tolist())


@pytest.mark.usefixtures("kernels")
def test_shortlist_is_a_prefix_of_rows_by_hamming_distance() -> None:
    rng = np.random.default_rng(3)
    vectors, q = _unit(rng, 20_000), _unit(rng, 1)[0]
    bits = np.ascontiguousarray(pack_signs(vectors).T)
    found = nearest_by_bits(bits, pack_signs(q[None, :])[0], 200)
    _assert_nearest_prefix(found, _distances(vectors, q), 200)


@pytest.mark.usefixtures("kernels")
def test_shortlist_is_complete_when_the_sample_guesses_too_low() -> None:
    rng = np.random.default_rng(4)
    q = _unit(rng, 1)[0]
    # Every other row points away from q; 13 sampled rows (every 16th) are q itself, so the
    # sample's cut-off distance (0) would keep 13 rows where 200 are asked for.
    vectors = -q + 0.05 * _unit(rng, 20_000)
    copies = list(range(0, 13 * 16, 16))
    vectors[copies] = q
    bits = np.ascontiguousarray(pack_signs(vectors).T)
    found = nearest_by_bits(bits, pack_signs(q[None, :])[0], 200)
    _assert_nearest_prefix(found, _distances(vectors, q), 200)
    assert set(copies) <= set(found.tolist())


def test_int8_scores_stay_within_two_thousandths_of_float32() -> None:
    rng = np.random.default_rng(5)
    vectors, q = _unit(rng, 2000), _unit(rng, 1)[0]
    index = _OwnerIndex()
    index.append([f"m{i}" for i in range(len(vectors))], vectors)
    rows = np.arange(len(vectors))
    assert np.abs(index.scores(rows, q) - vectors @ q).max() < 2e-3
    assert np.abs(index.vector(7) - vectors[7]).max() < 2e-3
    codes, scales = quantize(np.zeros((1, 8), np.float32))
    assert not codes.any() and scales[0] > 0  # a zero vector quantises without dividing by 0


@pytest.mark.parametrize("head", [1, 7, 50, 200, 599, 600, 601])
def test_the_ordered_head_is_the_start_of_the_full_order_ties_included(head: int) -> None:
    rng = np.random.default_rng(9)
    # Many exact copies, so that equal scores straddle every cut.
    vectors = _unit(rng, 40)[rng.integers(0, 40, 600)]
    index = _OwnerIndex()
    index.append([f"m{i}" for i in range(len(vectors))], vectors)
    rows, q = np.arange(len(vectors)), _unit(rng, 1)[0]
    full_rows, full_sims, whole = _ranked(index, q, rows)
    assert whole and len(full_rows) == 600
    got_rows, got_sims, got_whole = _ranked(index, q, rows, head=head)
    n = len(got_rows)
    assert got_whole == (head >= 600)
    assert n >= min(head, 600)
    assert got_rows.tolist() == full_rows[:n].tolist()
    assert got_sims.tolist() == full_sims[:n].tolist()
    assert n == 600 or full_sims[n] < got_sims[-1], "every row tied with the last is in"


def test_a_snapshot_restores_the_index_exactly() -> None:
    rng = np.random.default_rng(5)
    index = _OwnerIndex()
    index.append([f"m{i}" for i in range(300)], _unit(rng, 300))
    index.append(["m7", "m300"], _unit(rng, 2))  # m7's vector replaced
    index.max_seq, index.deletions, index.stale = 412, 3, 4
    data = to_snapshot(
        index.ids,
        index.bits,
        index.codes,
        index.scales,
        index.live,
        max_seq=index.max_seq,
        deletions=index.deletions,
        stale=index.stale,
    )
    assert data is not None
    restored = from_snapshot(data)
    assert restored is not None
    assert restored.ids == index.ids and restored.row_of == index.row_of
    assert (restored.max_seq, restored.deletions, restored.stale) == (412, 3, 4)
    for name in ("bits", "codes", "scales", "live"):
        assert np.array_equal(getattr(restored, name), getattr(index, name)), name
    assert not restored.live[7] and restored.row_of["m7"] == 300
    q = _unit(rng, 1)[0]
    rows = np.arange(len(index.ids))
    assert np.array_equal(restored.scores(rows, q), index.scores(rows, q))
    restored.append(["m999"], _unit(rng, 1))  # a restored index takes later rows
    assert restored.row_of["m999"] == len(index.ids)


def test_a_snapshot_of_another_layout_is_not_read() -> None:
    assert from_snapshot(b"") is None
    assert from_snapshot(b"EVIX0002" + bytes(200)) is None
    rng = np.random.default_rng(6)
    index = _OwnerIndex()
    index.append(["a", "b"], _unit(rng, 2))
    data = to_snapshot(
        index.ids,
        index.bits,
        index.codes,
        index.scales,
        index.live,
        max_seq=2,
        deletions=0,
        stale=0,
    )
    assert data is not None and from_snapshot(data[:-40]) is None
    assert (
        to_snapshot(
            ["a\0b", "c"],
            index.bits,
            index.codes,
            index.scales,
            index.live,
            max_seq=2,
            deletions=0,
            stale=0,
        )
        is None
    )


def test_the_shortlist_grows_with_the_owner_past_a_floor() -> None:
    index = SqliteVectorIndex()
    assert index.shortlist_for(500, 10) == 500
    assert index.shortlist_for(100_000, 10) == 768
    assert index.shortlist_for(100_000, 400) == 1600
    assert index.shortlist_for(1_000_000, 10) == 7500
