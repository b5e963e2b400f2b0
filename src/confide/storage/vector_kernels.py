"""The SQLite vector index's inner loops (the Hamming pass, the int8 re-scoring, the
shortlist's selection): compiled with numba when it is installed, NumPy otherwise.

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

Re-scoring reads four shortlisted rows a pass: at a million rows they lie far apart in memory
(not in cache), and four reads in flight wait for memory once where one row at a time waits
four times. The shortlist's selection (a histogram of the distances, then the rows within the
cut-off) is a compiled loop as well. On random unit vectors, alternating per query with the
loops before (one row at a time, NumPy's selection), at a million rows: re-scoring the
shortlist (10,801 rows with ties) 1.40 ms against 1.84, the Hamming pass with the selection
5.92 ms against 6.35; at 100k rows 0.13 against 0.18 ms and 0.30 against 0.35 ms (medians of
300 queries). ``bench/scale.py --compare index-loops=before`` times whole queries both ways.

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

__all__ = [
    "hamming_blocks",
    "hamming_distances",
    "int8_scores",
    "kernels_ready",
    "numba_available",
    "rows_within",
    "use_numba",
]

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


def _blocks_loop(
    flat: Any, words: Any, starts: Any, chosen: Any, query: Any, rows: Any, out: Any, found: Any
) -> None:
    # A partition's lists, one after another: list ``c``'s block holds ``words`` runs of its
    # rows' words, so each run streams as the word-major Hamming pass does. The block as a
    # 2-D view and the distances as a slice let the compiler vectorise the loop.
    at = 0
    for c in chosen:
        first = starts[c]
        count = starts[c + 1] - first
        block = flat[first * words : (first + count) * words].reshape((words, count))
        distance = out[at : at + count]
        distance[:] = 0
        for w in range(words):
            qw = query[w]
            run = block[w]
            for r in range(count):
                x = run[r] ^ qw
                x = x - ((x >> _ONE) & _M1)
                x = (x & _M2) + ((x >> _TWO) & _M2)
                x = (x + (x >> _FOUR)) & _M4
                distance[r] += np.uint16((x * _H01) >> _TOP)
        found[at : at + count] = rows[first : first + count]
        at += count


def _int8_loop(codes: Any, scales: Any, rows: Any, query: Any, out: Any) -> None:
    # Four rows a pass: the shortlist's rows lie far apart in ``codes`` (at a million rows,
    # memory rather than cache), and four independent reads in flight wait for memory once
    # where one row at a time waits four times.
    dims = codes.shape[1]
    count = rows.shape[0]
    i = 0
    while i + 4 <= count:
        r0, r1, r2, r3 = rows[i], rows[i + 1], rows[i + 2], rows[i + 3]
        a0 = a1 = a2 = a3 = np.float32(0.0)
        for j in range(dims):
            qj = query[j]
            a0 += np.float32(codes[r0, j]) * qj
            a1 += np.float32(codes[r1, j]) * qj
            a2 += np.float32(codes[r2, j]) * qj
            a3 += np.float32(codes[r3, j]) * qj
        out[i] = a0 * scales[r0]
        out[i + 1] = a1 * scales[r1]
        out[i + 2] = a2 * scales[r2]
        out[i + 3] = a3 * scales[r3]
        i += 4
    while i < count:
        r = rows[i]
        acc = np.float32(0.0)
        for j in range(dims):
            acc += np.float32(codes[r, j]) * query[j]
        out[i] = acc * scales[r]
        i += 1


def _within_loop(distance: Any, count: Any, step: Any, bins: Any, out: Any) -> int:
    # Plain loops where NumPy makes a histogram, its running sum, a Boolean array the length
    # of the index and that array's non-zero positions. The cut-off comes from every
    # ``step``-th row, or from all of them when the sample guessed too low.
    histogram = np.zeros(bins, np.int64)
    for sample in (step, 1):
        histogram[:] = 0
        for r in range(0, distance.shape[0], sample):
            histogram[distance[r]] += 1
        need = -(-count // sample)
        cutoff = total = 0
        while cutoff < bins - 1:
            total += histogram[cutoff]
            if total >= need:
                break
            cutoff += 1
        found = 0
        for r in range(distance.shape[0]):
            if distance[r] <= cutoff:
                out[found] = r
                found += 1
        if found >= count:
            break
    return found


def _hamming_numpy(bits: Any, query: Any, out: Any) -> None:
    # Whole-array operations, not a loop over words: each releases and retakes the GIL.
    np.sum(np.bitwise_count(bits ^ query[:, None]), axis=0, dtype=np.uint16, out=out)


def _blocks_numpy(
    flat: Any, words: Any, starts: Any, chosen: Any, query: Any, rows: Any, out: Any, found: Any
) -> None:
    at = 0
    for c in chosen:
        first, count = int(starts[c]), int(starts[c + 1] - starts[c])
        block = flat[first * words : (first + count) * words].reshape(words, count)
        _hamming_numpy(block, query, out[at : at + count])
        found[at : at + count] = rows[first : first + count]
        at += count


def _int8_numpy(codes: Any, scales: Any, rows: Any, query: Any, out: Any) -> None:
    # ``einsum``, not ``@``: it stays on this thread, where BLAS may split a product this size
    # across threads that then spin on the cores the embedder and the database need.
    np.multiply(np.einsum("ij,j->i", codes[rows].astype(np.float32), query), scales[rows], out=out)


def _within_numpy(distance: Any, count: Any, step: Any, bins: Any, out: Any) -> int:
    sampled = np.cumsum(np.bincount(distance[::step], minlength=bins))
    found = np.flatnonzero(distance <= int(np.searchsorted(sampled, -(-count // step))))
    if len(found) < count:
        cutoff = int(np.searchsorted(np.cumsum(np.bincount(distance, minlength=bins)), count))
        found = np.flatnonzero(distance <= cutoff)
    out[: len(found)] = found
    return len(found)


Kernel = Callable[..., None]
Kernels = tuple[Kernel, Kernel, Callable[..., int], Kernel]
"""The Hamming pass, the int8 re-scoring, the shortlist's selection (which returns how
many rows it wrote) and the Hamming pass over a partition's lists."""
_NUMPY: Kernels = (_hamming_numpy, _int8_numpy, _within_numpy, _blocks_numpy)
_lock = threading.Lock()
_compiled: Kernels | None = None
_kernels: Kernels | None = None  # the loops in use, once chosen
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


def _compile() -> Kernels | None:
    try:
        import numba
    except ImportError:  # installed but unusable, e.g. built for another NumPy
        return None
    return (
        numba.njit(nogil=True, cache=True)(_hamming_loop),
        numba.njit(nogil=True, cache=True, fastmath=True)(_int8_loop),
        numba.njit(nogil=True, cache=True)(_within_loop),
        numba.njit(nogil=True, cache=True)(_blocks_loop),
    )


def _chosen() -> Kernels:
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
    ``bits`` (``bits[w]`` holds word ``w`` of every row). A view of some of the columns is
    read in place, not copied."""
    out = np.empty(bits.shape[1], dtype=np.uint16)
    if bits.strides[1] != bits.itemsize:
        bits = np.ascontiguousarray(bits)
    _chosen()[0](bits, np.ascontiguousarray(query), out)
    return out


def hamming_blocks(
    flat: NDArray[np.uint64],
    words: int,
    starts: NDArray[np.intp],
    rows: NDArray[np.intp],
    chosen: NDArray[np.intp],
    query: NDArray[np.uint64],
) -> tuple[NDArray[np.intp], NDArray[np.uint16]]:
    """The rows of the ``chosen`` lists of a partition and their Hamming distances to
    ``query``, list after list: list ``c`` holds ``rows[starts[c]:starts[c + 1]]``, whose
    bits lie in ``flat`` as ``words`` runs of those rows' words (see
    :class:`~confide.storage.vector_partition.Partition`)."""
    size = int(np.sum(starts[chosen + 1] - starts[chosen])) if len(chosen) else 0
    out = np.empty(size, dtype=np.uint16)
    found = np.empty(size, dtype=np.intp)
    contiguous = np.ascontiguousarray
    _chosen()[3](
        contiguous(flat),
        words,
        contiguous(starts, dtype=np.intp),
        contiguous(chosen, dtype=np.intp),
        contiguous(query),
        contiguous(rows, dtype=np.intp),
        out,
        found,
    )
    return found, out


def rows_within(
    distance: NDArray[np.uint16], count: int, *, bins: int, step: int = 1
) -> NDArray[np.intp]:
    """Rows, in order, whose distance is at most a cut-off that at least ``count`` rows reach
    (every row when there are fewer), every row tied at the cut-off included.

    Distances are small integers (below ``bins``) with many ties, so the cut-off comes from
    a histogram, which costs less than a partial sort of every row. With ``step`` 1 it is
    the smallest such cut-off. With a larger ``step`` the histogram counts every
    ``step``-th row, and its cut-off stands when it keeps at least ``count`` rows (it may keep
    more); otherwise all rows are counted and the smallest cut-off is used.
    """
    out = np.empty(len(distance), dtype=np.intp)
    if len(distance) == 0:
        return out
    found = _chosen()[2](np.ascontiguousarray(distance), count, max(step, 1), bins, out)
    return out[:found]


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
