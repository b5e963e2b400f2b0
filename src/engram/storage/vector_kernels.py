"""The SQLite vector index's inner loops, compiled with numba (the GIL is released).

NumPy computes a Hamming distance over packed bits in three passes with two temporaries
(XOR, popcount, sum), and every pass gives up and retakes the GIL, which waits while worker
threads run Python. One compiled loop reads the bits once and retakes the GIL once. The
loops compile on first use and are cached on disk.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = ["hamming_distances", "int8_scores"]

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_ONE, _TWO, _FOUR, _TOP = np.uint64(1), np.uint64(2), np.uint64(4), np.uint64(56)


def _hamming_loop(bits: Any, query: Any, out: Any) -> None:
    words, rows = bits.shape
    for r in range(rows):
        out[r] = 0
    for w in range(words):  # word-major: each pass streams one contiguous row of words
        qw = query[w]
        row = bits[w]
        for r in range(rows):
            x = row[r] ^ qw
            x = x - ((x >> _ONE) & _M1)
            x = (x & _M2) + ((x >> _TWO) & _M2)
            x = (x + (x >> _FOUR)) & _M4
            out[r] += np.uint16((x * _H01) >> _TOP)


def _int8_loop(codes: Any, scales: Any, rows: Any, query: Any, out: Any) -> None:
    dims = codes.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        acc = np.float32(0.0)
        for j in range(dims):
            acc += np.float32(codes[r, j]) * query[j]
        out[i] = acc * scales[r]


_hamming = numba.njit(nogil=True, cache=True)(_hamming_loop)
_int8 = numba.njit(nogil=True, cache=True, fastmath=True)(_int8_loop)


def hamming_distances(bits: NDArray[np.uint64], query: NDArray[np.uint64]) -> NDArray[np.uint16]:
    """Hamming distance of ``query`` (one row of packed words) to every row of the word-major
    ``bits`` (``bits[w]`` holds word ``w`` of every row)."""
    out = np.empty(bits.shape[1], dtype=np.uint16)
    _hamming(np.ascontiguousarray(bits), np.ascontiguousarray(query), out)
    return out


def int8_scores(
    codes: NDArray[np.int8],
    scales: NDArray[np.float32],
    rows: NDArray[np.intp],
    query: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``(codes[rows] · query) * scales[rows]``: cosine to ``query`` of quantised unit rows."""
    out = np.empty(len(rows), dtype=np.float32)
    if len(rows):
        contiguous = np.ascontiguousarray
        _int8(
            codes, scales, contiguous(rows, dtype=np.intp), contiguous(query, dtype=np.float32), out
        )
    return out
