"""The compiled loops of the SQLite vector index agree with plain NumPy."""

from __future__ import annotations

import numpy as np

from engram.storage.sqlite_vectors import pack_signs, quantize
from engram.storage.vector_kernels import hamming_distances, int8_scores


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


def test_int8_scores_match_the_dequantised_dot_product() -> None:
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((500, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    codes, scales = quantize(vectors)
    query = vectors[42]
    rows = np.array([42, 0, 499, 7, 42], dtype=np.intp)
    expected = (codes[rows].astype(np.float64) @ query.astype(np.float64)) * scales[rows]
    got = int8_scores(codes, scales, rows, query)
    assert got.shape == (5,)
    assert np.allclose(got, expected, atol=1e-5)
    assert got[0] > 0.99  # a row against itself
    assert int8_scores(codes, scales, np.array([], dtype=np.intp), query).shape == (0,)
