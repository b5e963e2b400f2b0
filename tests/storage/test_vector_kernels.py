"""The SQLite vector index's loops: NumPy's and numba's agree with each other and with plain
NumPy, and numba is imported only when a search needs it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from confide.storage import vector_kernels
from confide.storage.sqlite_vectors import pack_signs, quantize
from confide.storage.vector_kernels import hamming_distances, int8_scores, rows_within


@pytest.mark.usefixtures("kernels")
def test_hamming_distances_match_numpy_popcount() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((1000, 384)).astype(np.float32)
    bits = np.ascontiguousarray(pack_signs(vectors).T)
    query = pack_signs(rng.standard_normal((1, 384)).astype(np.float32))[0]
    expected = np.sum(np.bitwise_count(bits ^ query[:, None]), axis=0)
    got = hamming_distances(bits, query)
    assert got.dtype == np.uint16
    assert np.array_equal(got, expected)
    assert hamming_distances(bits, bits[:, 17].copy())[17] == 0
    assert hamming_distances(bits[:, :0], query).shape == (0,)


@pytest.mark.usefixtures("kernels")
@pytest.mark.parametrize("dims", [64, 128, 192, 320, 448])
def test_hamming_distances_hold_for_any_number_of_words(dims: int) -> None:
    rng = np.random.default_rng(dims)
    bits = np.ascontiguousarray(pack_signs(rng.standard_normal((300, dims)).astype(np.float32)).T)
    query = pack_signs(rng.standard_normal((1, dims)).astype(np.float32))[0]
    expected = np.sum(np.bitwise_count(bits ^ query[:, None]), axis=0)
    assert np.array_equal(hamming_distances(bits, query), expected)
    assert hamming_distances(bits, bits[:, 5].copy())[5] == 0


def _unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    unit: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def _dequantised_dot(
    codes: np.ndarray, scales: np.ndarray, rows: np.ndarray, query: np.ndarray
) -> np.ndarray:
    dot: np.ndarray = (codes[rows].astype(np.float64) @ query.astype(np.float64)) * scales[rows]
    return dot


@pytest.mark.usefixtures("kernels")
def test_int8_scores_match_the_dequantised_dot_product() -> None:
    vectors = _unit_rows(np.random.default_rng(4), 500)
    codes, scales = quantize(vectors)
    query = vectors[42]
    rows = np.array([42, 0, 499, 7, 42], dtype=np.intp)
    expected = _dequantised_dot(codes, scales, rows, query)
    got = int8_scores(codes, scales, rows, query)
    assert got.dtype == np.float32
    assert got.shape == (5,)
    assert np.allclose(got, expected, atol=1e-5)
    assert got[0] > 0.99  # a row against itself
    assert int8_scores(codes, scales, np.array([], dtype=np.intp), query).shape == (0,)


@pytest.mark.usefixtures("kernels")
def test_int8_scores_hold_for_every_count_of_rows() -> None:
    # The compiled loop reads rows four at a time; the rest go one by one.
    rng = np.random.default_rng(8)
    vectors = _unit_rows(rng, 64)
    codes, scales = quantize(vectors)
    query = vectors[3]
    for count in range(10):
        rows = rng.choice(len(vectors), count).astype(np.intp)
        expected = _dequantised_dot(codes, scales, rows, query)
        assert np.allclose(int8_scores(codes, scales, rows, query), expected, atol=1e-5)


@pytest.mark.usefixtures("kernels")
def test_rows_within_keeps_every_row_up_to_the_count_th_distance() -> None:
    rng = np.random.default_rng(9)
    distance = rng.integers(0, 65, 5000).astype(np.uint16)
    for count in (1, 7, 100, 4999, 5000):
        cutoff = np.sort(distance)[count - 1]
        got = rows_within(distance, count, bins=65)
        assert np.array_equal(got, np.flatnonzero(distance <= cutoff))
    assert np.array_equal(rows_within(distance, 6000, bins=65), np.arange(5000))
    assert rows_within(distance[:0], 3, bins=65).shape == (0,)


@pytest.mark.usefixtures("kernels")
def test_rows_within_counts_every_row_when_the_sample_guesses_too_low() -> None:
    distance = np.full(3200, 9, dtype=np.uint16)
    distance[::16] = 0  # every sampled row is at distance 0: 200 rows, where 300 are asked
    distance[5] = 1
    got = rows_within(distance, 300, bins=65, step=16)
    assert np.array_equal(got, np.arange(3200))  # the 300th smallest is 9: every row
    got = rows_within(distance, 201, bins=65, step=16)
    assert np.array_equal(got, np.sort(np.append(np.arange(0, 3200, 16), 5)))


def test_numpy_and_numba_loops_agree_on_random_data() -> None:
    pytest.importorskip("numba")
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((5000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bits = np.ascontiguousarray(pack_signs(vectors).T)
    codes, scales = quantize(vectors)
    rows = rng.choice(len(vectors), 800).astype(np.intp)
    queries = rng.standard_normal((5, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    def run(numba: bool) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        vector_kernels.use_numba(numba)
        out = []
        for q in queries:
            distance = hamming_distances(bits, pack_signs(q[None, :])[0])
            nearest = rows_within(distance, 40, bins=385, step=16)
            out.append((distance, int8_scores(codes, scales, rows, q), nearest))
        return out

    try:
        plain, compiled = run(False), run(True)
    finally:
        vector_kernels.use_numba(True)
    for (ham_np, scores_np, near_np), (ham_nb, scores_nb, near_nb) in zip(
        plain, compiled, strict=True
    ):
        assert np.array_equal(ham_np, ham_nb)
        assert np.allclose(scores_np, scores_nb, atol=1e-5)
        assert len(near_np) >= 40
        assert np.array_equal(near_np, near_nb)


def test_numpy_loops_serve_when_numba_cannot_be_imported() -> None:
    code = (
        "import sys; sys.modules['numba'] = None;"  # `import numba` raises ImportError
        "import numpy as np;"
        "from confide.storage import vector_kernels as vk;"
        "from confide.storage.sqlite_vectors import _OwnerIndex, _ranked, nearest_by_bits,"
        " pack_signs;"
        "v = np.random.default_rng(1).standard_normal((3000, 384)).astype(np.float32);"
        "v /= np.linalg.norm(v, axis=1, keepdims=True);"
        "index = _OwnerIndex(); index.append([str(i) for i in range(3000)], v);"
        "rows = nearest_by_bits(index.bits, pack_signs(v[5:6])[0], 100);"
        "ranked, sims, _ = _ranked(index, v[5], rows);"
        "print(vk.numba_available(), vk._chosen() is vk._NUMPY, int(ranked[0]),"
        " 'llvmlite' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "5", "False"]


def test_importing_the_sqlite_backend_does_not_import_numba() -> None:
    code = (
        "import sys, confide, confide.storage.sqlite, confide.storage.sqlite_vectors;"
        "print('numba' in sys.modules, 'llvmlite' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
