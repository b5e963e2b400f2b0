"""Coarse lists over a large owner's vectors, so a search reads a few of them rather than
every row's sign bits.

At a million rows the SQLite index's Hamming pass reads all 48 MB of sign bits on every
query, which is memory-bound whatever the loop. A :class:`Partition` groups the rows into
about ``sqrt(rows)`` lists around centroids learnt by spherical k-means; a search scores the
centroids, reads the sign bits of the nearest lists only (each list's bits lie together in
memory), and hands the rows that pass on to the same shortlist and int8 re-scoring as before.
Rows appended after the partition was built (its tail) are read in full, until the next
build takes them in.

Why not a library: faiss (``faiss-cpu``) would bring its own index, threads and on-disk
format beside the sealed snapshots the index already keeps, for what is here a few NumPy
calls in a background thread; a partition is only an accelerator over arrays the index holds
anyway, built from their int8 codes and dropped or rebuilt at will.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from confide.storage.vector_kernels import hamming_blocks, hamming_distances

__all__ = ["Partition", "build_partition", "list_count"]


def list_count(rows: int) -> int:
    """How many lists a partition of ``rows`` rows has: about ``sqrt(rows)``, so a list holds
    about as many rows as there are centroids to score."""
    return max(1, round(math.sqrt(rows)))


@dataclass(frozen=True)
class Partition:
    """Rows ``[0, covered)`` of an owner's index grouped into lists around unit centroids."""

    centroids: NDArray[np.float32]
    """``(lists, dims)``, unit rows."""
    starts: NDArray[np.intp]
    """``(lists + 1,)``: list ``c`` holds ``rows[starts[c]:starts[c + 1]]``."""
    rows: NDArray[np.intp]
    """The index's rows, grouped by list."""
    bits: NDArray[np.uint64]
    """The rows' sign bits, list by list, each list's block word-major (``words`` runs of
    that list's rows), flat."""
    words: int
    covered: int

    @property
    def lists(self) -> int:
        """How many lists there are."""
        return len(self.centroids)

    def nbytes(self) -> int:
        """Bytes of the arrays the partition adds to its index."""
        return self.centroids.nbytes + self.starts.nbytes + self.rows.nbytes + self.bits.nbytes

    def nearest_lists(self, query: NDArray[np.float32], probes: int) -> NDArray[np.intp]:
        """The ``probes`` lists whose centroids are nearest to ``query``, in list order."""
        if probes >= self.lists:
            return np.arange(self.lists)
        # ``einsum``, not ``@``: a product this size stays on this thread (see
        # ``vector_kernels._int8_numpy``).
        scores = np.einsum("ij,j->i", self.centroids, query)
        return np.sort(np.argpartition(-scores, probes - 1)[:probes])

    def candidates(
        self,
        all_bits: NDArray[np.uint64],
        query: NDArray[np.float32],
        query_bits: NDArray[np.uint64],
        probes: int,
    ) -> tuple[NDArray[np.intp], NDArray[np.uint16]]:
        """Rows of the ``probes`` nearest lists and of the tail (rows past ``covered`` in the
        index's word-major ``all_bits``), with their Hamming distances to ``query_bits``."""
        chosen = self.nearest_lists(query, probes)
        rows, distance = hamming_blocks(
            self.bits, self.words, self.starts, self.rows, chosen, query_bits
        )
        total = all_bits.shape[1]
        if total > self.covered:
            tail = hamming_distances(all_bits[:, self.covered :], query_bits)
            rows = np.concatenate([rows, np.arange(self.covered, total)])
            distance = np.concatenate([distance, tail])
        return rows, distance


def build_partition(
    codes: NDArray[np.int8],
    scales: NDArray[np.float32],
    bits: NDArray[np.uint64],
    *,
    lists: int,
    iterations: int = 10,
    sample_per_list: int = 40,
    chunk: int = 16_384,
    seed: int = 0,
) -> Partition:
    """Learn ``lists`` centroids from a sample of the rows (spherical k-means on their
    dequantised int8 codes), put every row in the list of its nearest centroid, and lay out
    the sign bits (word-major ``bits``, one column a row) list by list.

    Matrix products here go through BLAS, which may use both cores: this runs in a
    background thread, never on a query's path.
    """
    rows = len(codes)
    lists = max(1, min(lists, rows))
    rng = np.random.default_rng(seed)

    def dequantised(at: NDArray[np.intp] | slice) -> NDArray[np.float32]:
        return np.asarray(codes[at].astype(np.float32) * scales[at][:, None], np.float32)

    sample = dequantised(np.sort(rng.choice(rows, min(rows, lists * sample_per_list), False)))
    centroids = sample[rng.choice(len(sample), lists, replace=False)].copy()
    for _ in range(iterations):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        by_list = np.argsort(nearest, kind="stable")
        counts = np.bincount(nearest, minlength=lists)
        sums = np.zeros_like(centroids)
        held = counts > 0
        firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])[held]
        sums[held] = np.add.reduceat(sample[by_list], firsts, axis=0)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms == 0
        if empty.any():  # an empty list restarts at a sampled row
            sums[empty] = sample[rng.choice(len(sample), int(empty.sum()), replace=False)]
            norms[empty] = np.linalg.norm(sums[empty], axis=1)
        centroids = (sums / norms[:, None]).astype(np.float32)
    assigned = np.empty(rows, np.intp)
    for start in range(0, rows, chunk):
        block = dequantised(slice(start, start + chunk))
        assigned[start : start + len(block)] = np.argmax(block @ centroids.T, axis=1)
    order = np.argsort(assigned, kind="stable")
    starts = np.zeros(lists + 1, np.intp)
    np.cumsum(np.bincount(assigned, minlength=lists), out=starts[1:])
    grouped = bits[:, :rows][:, order]  # word-major, rows in list order
    flat = np.concatenate(
        [np.ascontiguousarray(grouped[:, starts[c] : starts[c + 1]]).ravel() for c in range(lists)]
    )
    return Partition(
        centroids=centroids,
        starts=starts,
        rows=order.astype(np.intp),
        bits=flat,
        words=bits.shape[0],
        covered=rows,
    )
