"""The SQLite vector index's two inner loops: compiled with numba when it is installed, NumPy
otherwise.

numba (with llvmlite, about 200 MB) is the optional extra ``fast``; a plain install gets the
NumPy versions, which give the same distances and the same scores (a test compares them).
Neither numba nor its compiled loops load with this module: the first search picks them.

Why compiled loops at all: NumPy computes a Hamming distance over packed bits in three passes
with two temporaries (XOR, popcount, sum), and re-scoring first gathers the shortlist's codes
into a float copy; one compiled loop reads the bits once, needs no copy, and releases the GIL
once (``nogil``) where each NumPy pass releases and retakes it. Measured on 384 dimensions:
the Hamming pass over 100k rows takes 0.08 ms compiled and 0.45 ms in NumPy, re-scoring 768
rows 0.02 and 0.1 ms; a search's shortlist and re-scoring together 0.45 and 1.0 ms at 100k
rows, 0.13 and 0.26 ms at 10k (alternating per query in one process). Beside a thread that
runs Python, both reach the same p95 (about 10 ms): the rest of the search still hands the GIL
back and forth. In ``bench/scale.py`` the median search at 100k rows is 0.66-0.93 ms with
numba and 1.24-2.17 ms without; at 10k the two are within noise, as are whole queries.
Vector libraries with SIMD kernels (simsimd, numkong) were no faster than NumPy here: on
48-byte codes a call's fixed cost dominates. The loops compile on first use and are cached
on disk.

``use_numba(False)`` selects the NumPy versions where numba is installed
(``bench/scale.py --kernels numpy``), to compare the two in one environment.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["hamming_distances", "int8_scores", "kernels_ready", "numba_available", "use_numba"]

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


def _hamming_numpy(bits: Any, query: Any, out: Any) -> None:
    # Whole-array operations, not a loop over words: each releases and retakes the GIL.
    np.sum(np.bitwise_count(bits ^ query[:, None]), axis=0, dtype=np.uint16, out=out)


def _int8_numpy(codes: Any, scales: Any, rows: Any, query: Any, out: Any) -> None:
    # ``einsum``, not ``@``: it stays on this thread, where BLAS may split a product this size
    # across threads that then spin on the cores the embedder and the database need.
    np.multiply(np.einsum("ij,j->i", codes[rows].astype(np.float32), query), scales[rows], out=out)


Kernel = Callable[..., None]
_NUMPY: tuple[Kernel, Kernel] = (_hamming_numpy, _int8_numpy)
_lock = threading.Lock()
_compiled: tuple[Kernel, Kernel] | None = None
_kernels: tuple[Kernel, Kernel] | None = None  # the pair in use, once chosen
_want_numba = True


def numba_available() -> bool:
    """Whether numba is installed (the ``fast`` extra), without importing it."""
    return importlib.util.find_spec("numba") is not None


def kernels_ready() -> bool:
    """Whether the loops in use have been chosen (and, with numba, compiled) yet."""
    return _kernels is not None


def use_numba(enabled: bool) -> None:
    """Use the numba loops when installed (the default), or the NumPy versions if ``False``."""
    global _kernels, _want_numba
    with _lock:
        _want_numba, _kernels = enabled, None


def _compile() -> tuple[Kernel, Kernel] | None:
    try:
        import numba
    except ImportError:  # installed but unusable, e.g. built for another NumPy
        return None
    return (
        numba.njit(nogil=True, cache=True)(_hamming_loop),
        numba.njit(nogil=True, cache=True, fastmath=True)(_int8_loop),
    )


def _chosen() -> tuple[Kernel, Kernel]:
    global _compiled, _kernels
    kernels = _kernels
    if kernels is not None:
        return kernels
    with _lock:
        if _kernels is None:
            if _want_numba and _compiled is None and numba_available():
                _compiled = _compile()
            _kernels = _compiled if _want_numba and _compiled is not None else _NUMPY
        return _kernels


def hamming_distances(bits: NDArray[np.uint64], query: NDArray[np.uint64]) -> NDArray[np.uint16]:
    """Hamming distance of ``query`` (one row of packed words) to every row of the word-major
    ``bits`` (``bits[w]`` holds word ``w`` of every row)."""
    out = np.empty(bits.shape[1], dtype=np.uint16)
    _chosen()[0](np.ascontiguousarray(bits), np.ascontiguousarray(query), out)
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
        _chosen()[1](
            codes, scales, contiguous(rows, dtype=np.intp), contiguous(query, dtype=np.float32), out
        )
    return out
