"""Vector search for the SQLite backend: an in-process index over the ``embeddings`` table.

SQLite has no ANN index of its own here, and a full float scan of 100k vectors costs tens of
milliseconds, so each owner's vectors are held in memory twice: as sign bits (48 bytes for
384 dimensions, compared by Hamming distance) and as int8 codes with one scale per row for
re-scoring (cosine within about 0.001 of float32, a quarter of its memory). A query takes
a shortlist of the nearest candidates by bits, re-scores it, and keeps those that pass the
filter *in the database* (``id IN (...) AND <filter>``). When too few pass (a selective
filter), the database returns the ids matching the filter and those are scored, so the
full top-k always comes back.

Stored vectors are sealed under their owner's key (see ``confide.index.vectors``): a user's
rows are opened as they are loaded, by the opener the caller passes, and a row that does not
open (tampered, moved, or its key destroyed by an erasure) is left out of the index.

An owner of many rows (``partition_rows``, 250k) is also partitioned into lists around
learnt centroids (:mod:`confide.storage.vector_partition`), so that a search reads the sign
bits of the nearest ``probe_share`` of the lists, and of the rows appended since, rather than
all of them: at a million rows the full pass reads 48 MB a query. The partition is built in
the background (seconds of both cores at a million rows, BLAS doing the products) when the
owner first grows past the threshold, after a cold load, and again once ``partition_share``
of its rows have been appended past it; searches read every row's bits until it is there. It
is not snapshotted: it is an accelerator, rebuilt from the codes the index holds.

The table stays the source of truth: the index loads only rows with a ``seq`` it has not
seen, learns of new rows and deletions from ``vector_owners`` (kept by triggers, so other
processes' writes are seen too), and reloads an owner once deleted rows pile up.

Opening and quantising every row of a large user is most of a cold first query (seconds at
100k rows), so once an owner's index has grown since its last snapshot by ``snapshot_rows``
rows or by ``snapshot_share`` of its size (the larger), a background thread writes the index
as it is (bits, codes, scales, ids) as one
blob sealed under the owner's key (:class:`SnapshotStore`). A cold load reads that blob and
only the rows with a later ``seq``; deletions since the snapshot count as stale rows, as they
do for a cached index. A snapshot that does not open (an erasure destroyed its key) or no
longer matches ``vector_owners`` is ignored and the rows are loaded instead.

Each rewrite costs the whole index (about 470 bytes a row at 384 dimensions), so the rule
weighs writes against cold loads: with a fixed count of 1,000 rows a user of 100k memories
would rewrite 47 MB per 1,000 new memories (47 KB a memory, 470 KB at a million), while a
share of 5% bounds it at about 9.4 KB a new memory at any size (the rows themselves weigh a
few KB) and a cold load opens at most 5% of the rows past the snapshot.
"""

from __future__ import annotations

import itertools
import logging
import math
import struct
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from confide.storage.base import ScoredId, StoredVector, Vector
from confide.storage.sql import SqlExecutor
from confide.storage.vector_kernels import hamming_distances, int8_scores, rows_within
from confide.storage.vector_partition import Partition, build_partition, list_count

log = logging.getLogger(__name__)

Owner = tuple[str, str]
Opener = Callable[[Owner, Sequence[StoredVector]], list[bytes | None]]
"""Opens one owner's stored vectors as float32 bytes (``None`` for a row that does not open)."""


@dataclass
class _OwnerIndex:
    ids: list[str] = field(default_factory=list)
    bits: NDArray[np.uint64] = field(default_factory=lambda: np.zeros((0, 0), np.uint64))
    codes: NDArray[np.int8] = field(default_factory=lambda: np.zeros((0, 0), np.int8))
    scales: NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    row_of: dict[str, int] = field(default_factory=dict)
    live: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, np.bool_))
    """False where a later row holds the same memory id (its vector was replaced)."""
    max_seq: int = 0
    deletions: int = 0
    stale: int = 0
    unsaved: int = 0
    """Rows loaded since the snapshot this index was loaded from (or last handed to be
    written); ``seq`` is shared by every owner, so it cannot tell."""
    partition: Partition | None = None
    """Lists over the first rows, once a large index has them (built in the background)."""
    partitioning: bool = False
    """A partition is being built for this index."""

    def append(self, ids: list[str], vectors: NDArray[np.float32]) -> None:
        # Bits are stored word-major (one contiguous row per 64-bit word), which is how the
        # Hamming distance reads them.
        bits = np.ascontiguousarray(pack_signs(vectors).T)
        codes, scales = quantize(vectors)
        if self.bits.size == 0:
            self.bits, self.codes, self.scales = bits, codes, scales
        else:
            self.bits = np.hstack([self.bits, bits])
            self.codes = np.vstack([self.codes, codes])
            self.scales = np.concatenate([self.scales, scales])
        self.live = np.concatenate([self.live, np.ones(len(ids), np.bool_)])
        for offset, memory_id in enumerate(ids):
            replaced = self.row_of.get(memory_id)
            if replaced is not None:
                self.stale += 1
                self.live[replaced] = False
            self.row_of[memory_id] = len(self.ids) + offset
        self.ids.extend(ids)

    def vector(self, row: int) -> NDArray[np.float32]:
        """The row's vector as re-scoring sees it (dequantised)."""
        return np.asarray(self.codes[row].astype(np.float32) * self.scales[row], np.float32)

    def scores(self, rows: NDArray[np.intp], query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Cosine of ``query`` to each of ``rows`` (stored vectors are unit length).

        On this thread and never through BLAS, which may split a product this size across
        threads that then spin on the cores the embedder and the database need: a compiled
        loop with the ``fast`` extra, ``einsum`` over a float copy of the rows without it.
        """
        return int8_scores(self.codes, self.scales, rows, query)


_MAGIC = b"EVIX0001"
_HEADER = struct.Struct("<8sqqqqqq")  # magic, rows, dims, words, max_seq, deletions, stale


def to_snapshot(
    ids: Sequence[str],
    bits: NDArray[np.uint64],
    codes: NDArray[np.int8],
    scales: NDArray[np.float32],
    live: NDArray[np.bool_],
    *,
    max_seq: int,
    deletions: int,
    stale: int,
) -> bytes | None:
    """An owner's index as one byte string (``None`` when it cannot be written so).

    Plain arrays behind a fixed header, never pickle: the blob is opened again with no more
    trust than its seal gives. Ids are joined by NUL (an index with an id holding one is
    not snapshotted: it loads from its rows).
    """
    joined = "\0".join(ids)
    if not ids or joined.count("\0") != len(ids) - 1:
        return None
    words, rows = bits.shape
    header = _HEADER.pack(_MAGIC, rows, codes.shape[1], words, max_seq, deletions, stale)
    return b"".join(
        (
            header,
            np.ascontiguousarray(bits).tobytes(),
            np.ascontiguousarray(scales, np.float32).tobytes(),
            np.ascontiguousarray(codes).tobytes(),
            np.ascontiguousarray(live, np.bool_).tobytes(),
            joined.encode(),
        )
    )


def from_snapshot(data: bytes) -> _OwnerIndex | None:
    """The index :func:`to_snapshot` wrote, or ``None`` for a blob of another layout."""
    if len(data) < _HEADER.size:
        return None
    magic, rows, dims, words, max_seq, deletions, stale = _HEADER.unpack_from(data)
    if magic != _MAGIC or rows <= 0:
        return None
    sizes = (words * rows * 8, rows * 4, rows * dims, rows)
    if len(data) < _HEADER.size + sum(sizes):
        return None
    view = memoryview(data)
    at = _HEADER.size
    parts = []
    for size in sizes:
        parts.append(view[at : at + size])
        at += size
    ids = bytes(view[at:]).decode().split("\0")
    if len(ids) != rows:
        return None
    # Copies: the arrays must be writable and aligned like those a load from rows makes.
    index = _OwnerIndex(
        ids=ids,
        bits=np.frombuffer(parts[0], np.uint64).reshape(words, rows).copy(),
        scales=np.frombuffer(parts[1], np.float32).copy(),
        codes=np.frombuffer(parts[2], np.int8).reshape(rows, dims).copy(),
        live=np.frombuffer(parts[3], np.bool_).copy(),
        max_seq=max_seq,
        deletions=deletions,
        stale=stale,
    )
    # The last row of an id is the one that holds it (as ``append`` keeps it).
    index.row_of = dict(zip(ids, range(rows), strict=True))
    return index


class SnapshotStore(Protocol):
    """Where sealed index snapshots live (the SQLite store, which seals and opens them)."""

    def load_index_snapshot(self, db: SqlExecutor, owner: Owner) -> tuple[int, int, bytes] | None:
        """The owner's stored snapshot opened, as ``(max_seq, deletions, data)``; ``None``
        when there is none or it does not open."""
        ...

    def save_index_snapshot(self, owner: Owner, max_seq: int, deletions: int, data: bytes) -> None:
        """Seal and store ``data`` as the owner's snapshot, unless a newer one is stored or
        the owner's vectors are gone (erased) meanwhile."""
        ...


class _Background:
    """One background thread that runs the index's jobs (snapshots to write, partitions to
    build) off the query path: the latest job per key, one at a time."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, Owner], Callable[[], None]] = {}
        self._changed = threading.Condition()
        self._busy = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def submit(self, key: tuple[str, Owner], job: Callable[[], None]) -> bool:
        """Run ``job`` in the background (replacing a pending one of the same ``key``);
        ``False`` once stopped."""
        with self._changed:
            if self._stopped:
                return False
            self._pending[key] = job
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="confide-vector-index", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()
            return True

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._stopped:
                    self._changed.wait()
                if self._stopped:
                    return
                (kind, _), job = self._pending.popitem()
                self._busy = True
            try:
                job()
            except Exception as exc:  # a cache or an accelerator: the rows stay the truth
                log.warning("a vector index %s failed: %s", kind, type(exc).__name__)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def flush(self) -> None:
        """Wait until every submitted job has run (or failed)."""
        with self._changed:
            while (self._pending or self._busy) and not self._stopped:
                self._changed.wait()

    def stop(self) -> None:
        """Drop what is pending and let the thread end after its current write."""
        with self._changed:
            self._stopped = True
            self._pending.clear()
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)


def warm_up(dims: int) -> None:
    """Search a small index once, in full and through a partition with rows past it, so the
    vector loops are compiled (or loaded from numba's on-disk cache) now rather than during
    the first real search."""
    vectors = np.random.default_rng(0).standard_normal((4, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = _OwnerIndex()
    index.append(["a", "b", "c"], vectors[:3])
    partition = build_partition(index.codes, index.scales, index.bits, lists=2, iterations=1)
    index.append(["d"], vectors[3:])
    q = vectors[0]
    q_bits = pack_signs(q[None, :])[0]
    rows = nearest_by_bits(index.bits, q_bits, 1)
    index.scores(rows, q)
    partition.candidates(index.bits, q, q_bits, 1)


def quantize(vectors: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Symmetric int8 codes with one scale per row: ``vector ≈ codes * scale``."""
    peak = np.abs(vectors).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(vectors / scales[:, None]).astype(np.int8)
    return codes, scales


def pack_signs(vectors: NDArray[np.float32]) -> NDArray[np.uint64]:
    """Sign bits of each vector, packed into 64-bit words."""
    bits = np.packbits(vectors > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits).view(np.uint64)


def nearest_by_bits(
    bits: NDArray[np.uint64], query: NDArray[np.uint64], count: int
) -> NDArray[np.intp]:
    """Rows of (at least) the ``count`` smallest Hamming distances to ``query``, in row order.

    ``bits`` is word-major: ``bits[w]`` holds word ``w`` of every row. The cut-off distance
    comes from a histogram of every 16th row when there are many rows for ``count``
    (:func:`~confide.storage.vector_kernels.rows_within`).
    """
    words, rows = bits.shape
    distance = hamming_distances(bits, query)
    if count >= rows:
        return np.arange(rows)
    step = 16 if rows >= 64 * count else 1
    return rows_within(distance, count, bins=words * 64 + 1, step=step)


class SqliteVectorIndex:
    """Per-owner in-memory vector indexes over one SQLite database (thread-safe)."""

    def __init__(
        self,
        *,
        max_rows: int = 2_000_000,
        shortlist: int = 768,
        shortlist_share: float = 0.0075,
        snapshots: SnapshotStore | None = None,
        snapshot_rows: int = 1000,
        snapshot_share: float = 0.05,
        head_chunks: int = 4,
        partition_rows: int = 250_000,
        partition_share: float = 0.05,
        probe_share: float = 0.15,
    ) -> None:
        self._owners: OrderedDict[Owner, _OwnerIndex] = OrderedDict()
        self._lock = threading.Lock()
        self._max_rows = max_rows
        self.shortlist = shortlist
        self.shortlist_share = shortlist_share
        """The shortlist is at least this share of an owner's rows: at a million rows 768 is
        0.08% of them and the sign bits leave a tenth of the true top 10 out of it
        (``ann_recall@10`` 0.894 in ``bench/scale.py --sizes 1000000``); up to 100k rows
        the floor of 768 is the larger."""
        self.head_chunks = head_chunks
        """Chunks of the re-scored shortlist put in order before the filter is asked about
        the first (``0``: all of it). The first chunk usually holds the answer; at a million
        rows the shortlist holds thousands (``bench/scale.py --compare head-chunks=0``)."""
        self._snapshots = snapshots
        self._background = _Background()
        self.snapshot_rows = snapshot_rows
        """The fewest rows an owner's index grows by before its snapshot is written again: a
        rewrite costs the whole index, loading rows past the snapshot costs each row."""
        self.snapshot_share = snapshot_share
        """The share of its size an owner's index grows by before its snapshot is written
        again, when that is more than ``snapshot_rows``: a rewrite's cost per new row stays
        the same at any size."""
        self.partition_rows = partition_rows
        """The fewest rows an owner's index holds before it is partitioned into lists
        (:mod:`confide.storage.vector_partition`): below it one pass over every row's sign
        bits costs less than a millisecond."""
        self.partition_share = partition_share
        """The share of a partition's rows that may be appended past it before it is built
        again (those rows are read in full on every search meanwhile)."""
        self.probe_share = probe_share
        """The share of a partition's lists a search reads (at least one). Chosen on
        distinct LoCoMo texts leaving one conversation out (``bench/partition_recall.py``):
        the smallest share whose ``ann_recall@10`` over the other conversations' questions
        reaches 0.97, which four folds of five put at 0.15."""
        self.partitions = True
        """Search through an owner's partition once built (``False``: read every row's
        bits, as before partitions; ``bench/scale.py --compare partitions=off``)."""

    def snapshot_threshold(self, rows: int) -> int:
        """How many new rows an index of ``rows`` rows takes before its next snapshot."""
        return max(self.snapshot_rows, int(rows * self.snapshot_share))

    def flush(self) -> None:
        """Wait until the background work handed on so far is done: snapshots stored and
        partitions built."""
        self._background.flush()

    def close(self) -> None:
        """Stop the background work (what is pending is dropped: the rows stay the truth)."""
        self._background.stop()

    def clear(self) -> None:
        """Forget every cached owner."""
        with self._lock:
            self._owners.clear()

    def lookup(self, account_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """Vectors of these ids that a cached owner of the account holds (dequantised)."""
        out: dict[str, Vector] = {}
        with self._lock:
            indexes = [i for (acct, _), i in self._owners.items() if acct == account_id]
            for index in indexes:
                for memory_id in memory_ids:
                    row = index.row_of.get(memory_id)
                    if row is not None and memory_id not in out:
                        out[memory_id] = index.vector(row)
        return out

    def _refresh(self, db: SqlExecutor, owner: Owner, opener: Opener) -> _OwnerIndex:
        state = db.run(
            "SELECT max_seq, deletions FROM vector_owners WHERE account_id = ? AND user_id = ?",
            list(owner),
        ).fetchone()
        max_seq, deletions = (int(state[0]), int(state[1])) if state else (0, 0)
        with self._lock:
            index = self._owners.get(owner)
            if index is not None and (state is None or deletions < index.deletions):
                index = None  # the owner was erased (or the counters were reset)
            if index is not None and index.deletions != deletions:
                index.stale += deletions - index.deletions
                index.deletions = deletions
                if index.stale * 5 > len(index.ids):
                    index = None  # too many dead rows: reload
            if index is None:
                index = self._from_snapshot(db, owner, max_seq, deletions)
                self._owners[owner] = index
            self._owners.move_to_end(owner)
            if index.max_seq >= max_seq:
                self._partition_later(owner, index)
                return index
            rows = db.run(
                "SELECT seq, memory_id, model_id, key_id, vector FROM embeddings "
                "WHERE account_id = ? AND user_id = ? AND seq > ? ORDER BY seq",
                [*owner, index.max_seq],
            ).fetchall()
            if rows:
                stored = [StoredVector(str(r[1]), str(r[2]), r[3], bytes(r[4])) for r in rows]
                opened = opener(owner, stored)
                kept = [
                    (s.memory_id, v) for s, v in zip(stored, opened, strict=True) if v is not None
                ]
                if kept:
                    matrix = np.frombuffer(b"".join(v for _, v in kept), dtype=np.float32)
                    index.append([m for m, _ in kept], matrix.reshape(len(kept), -1))
                    index.unsaved += len(kept)
                index.max_seq = int(rows[-1][0])
            self._evict()
            if index.unsaved >= self.snapshot_threshold(len(index.ids)):
                self._snapshot_later(owner, index)
            self._partition_later(owner, index)
            return index

    def _from_snapshot(
        self, db: SqlExecutor, owner: Owner, max_seq: int, deletions: int
    ) -> _OwnerIndex:
        """The owner's index from its stored snapshot, or an empty one to load from rows."""
        empty = _OwnerIndex(deletions=deletions)
        if self._snapshots is None or max_seq == 0:
            return empty
        stored = self._snapshots.load_index_snapshot(db, owner)
        if stored is None:
            return empty
        snapshot_seq, snapshot_deletions, data = stored
        if snapshot_seq > max_seq or snapshot_deletions > deletions:
            return empty  # the counters were reset since (an erasure, then new rows)
        index = from_snapshot(data)
        if index is None or index.max_seq != snapshot_seq:
            return empty
        index.stale += deletions - snapshot_deletions
        index.deletions = deletions
        if index.stale * 5 > len(index.ids):
            return empty  # too many dead rows: reload (and snapshot the result)
        return index

    def _snapshot_later(self, owner: Owner, index: _OwnerIndex) -> None:
        """Hand a copy of the index's state to the writer thread (under ``self._lock``)."""
        snapshots = self._snapshots
        if snapshots is None or not index.ids:
            return
        index.unsaved = 0
        # ``append`` replaces these arrays rather than changing them, but for ``live``.
        ids, bits, codes, scales = list(index.ids), index.bits, index.codes, index.scales
        live, max_seq, deletions, stale = (
            index.live.copy(),
            index.max_seq,
            index.deletions,
            index.stale,
        )

        def write() -> None:
            data = to_snapshot(
                ids, bits, codes, scales, live, max_seq=max_seq, deletions=deletions, stale=stale
            )
            if data is not None:
                snapshots.save_index_snapshot(owner, max_seq, deletions, data)

        self._background.submit(("snapshot", owner), write)

    def _partition_later(self, owner: Owner, index: _OwnerIndex) -> None:
        """Have the background build a partition for a large index whose rows have outgrown
        the one it has (under ``self._lock``); searches read every row's bits meanwhile."""
        rows = len(index.ids)
        if index.partitioning or rows < self.partition_rows:
            return
        covered = index.partition.covered if index.partition is not None else 0
        if rows - covered <= covered * self.partition_share:
            return
        # ``append`` replaces these arrays rather than changing them.
        codes, scales, bits = index.codes, index.scales, index.bits

        def build() -> None:
            try:
                built = build_partition(codes, scales, bits, lists=list_count(rows))
            finally:
                with self._lock:
                    index.partitioning = False
            with self._lock:
                if self._owners.get(owner) is index:  # not reloaded or evicted meanwhile
                    index.partition = built

        index.partitioning = self._background.submit(("partition", owner), build)

    def _evict(self) -> None:
        total = sum(len(i.ids) for i in self._owners.values())
        while total > self._max_rows and len(self._owners) > 1:
            _, dropped = self._owners.popitem(last=False)
            total -= len(dropped.ids)

    def footprint(self) -> tuple[int, int]:
        """``(rows, bytes)`` of the indexes held in memory now: the sign bits, int8 codes and
        scales, plus the ids and their row map as Python objects (``sys.getsizeof``)."""
        with self._lock:
            owners = list(self._owners.values())
        rows = sum(len(i.ids) for i in owners)
        arrays = sum(
            i.bits.nbytes
            + i.codes.nbytes
            + i.scales.nbytes
            + i.live.nbytes
            + (i.partition.nbytes() if i.partition is not None else 0)
            for i in owners
        )
        objects = sum(
            sys.getsizeof(i.ids) + sys.getsizeof(i.row_of) + sum(map(sys.getsizeof, i.ids))
            for i in owners
        )
        return rows, arrays + objects

    def shortlist_for(self, rows: int, k: int) -> int:
        """How many rows the sign bits pass on to be re-scored, for ``rows`` rows and top-``k``."""
        return min(rows, max(self.shortlist, 4 * k, math.ceil(self.shortlist_share * rows)))

    def probes_for(self, partition: Partition) -> int:
        """How many of the partition's lists a search reads."""
        return max(1, math.ceil(self.probe_share * partition.lists))

    def _nearest_in_partition(
        self, index: _OwnerIndex, partition: Partition, q: NDArray[np.float32], count: int
    ) -> NDArray[np.intp]:
        """Rows of at least the ``count`` smallest Hamming distances among the nearest lists
        and the rows past the partition (all of them when they are fewer), in row order as
        the full pass gives them, so that rows tied in score are taken in the same order."""
        rows, distance = partition.candidates(
            index.bits, q, pack_signs(q[None, :])[0], self.probes_for(partition)
        )
        if count < len(rows):
            step = 16 if len(rows) >= 64 * count else 1
            rows = rows[rows_within(distance, count, bins=partition.words * 64 + 1, step=step)]
        return np.sort(rows)

    def search(
        self,
        db: SqlExecutor,
        owner: Owner,
        query: Vector,
        k: int,
        passes_filter: Callable[[list[str]], Collection[str]],
        filter_ids: Callable[[], list[str]],
        opener: Opener,
    ) -> list[ScoredId]:
        """Top-``k`` by cosine among the owner's memories that pass the database filter.

        ``passes_filter`` returns those of the given ids that match the filter; ``opener``
        opens the owner's stored vectors as they are loaded.
        """
        index = self._refresh(db, owner, opener)
        if not index.ids or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        shortlist = self.shortlist_for(len(index.ids), k)
        exhaustive = shortlist >= len(index.ids)
        if exhaustive:
            rows = np.arange(len(index.ids))
        elif index.partition is not None and self.partitions:
            rows = self._nearest_in_partition(index, index.partition, q, shortlist)
        else:
            rows = nearest_by_bits(index.bits, pack_signs(q[None, :])[0], shortlist)
        # Ask the database about the best-scored ids first, a chunk at a time: with an
        # ordinary filter the first chunk already holds k that pass, so only the first few
        # chunks are put in order (the rest only if the filter turns most of them away).
        hits: list[ScoredId] = []
        chunk = max(16, k + k // 4)
        ranked, sims, whole = _ranked(index, q, rows, head=self.head_chunks * chunk or None)
        for start in itertools.count(0, chunk):
            if start + chunk > len(ranked) and not whole:
                # Past the ordered head: the full order begins with the same rows.
                ranked, sims, whole = _ranked(index, q, rows)
            if start >= len(ranked):
                break
            part = _scored(index, ranked[start : start + chunk], sims[start : start + chunk])
            allowed = passes_filter([memory_id for memory_id, _ in part])
            hits.extend(ScoredId(m, s) for m, s in part if m in allowed)
            if len(hits) >= k:
                return hits[:k]
            if start == 0 and not exhaustive and len(allowed) * 4 < len(part):
                break  # a selective filter: the exact path below is cheaper
        if exhaustive:
            return hits[:k]
        # Selective filter: score every memory the database says matches it.
        wanted = [index.row_of[m] for m in filter_ids() if m in index.row_of]
        if not wanted:
            return hits[:k]
        ranked, sims, _ = _ranked(index, q, np.asarray(wanted), head=k)
        return [ScoredId(m, s) for m, s in _scored(index, ranked[:k], sims[:k])]


def _ranked(
    index: _OwnerIndex, q: NDArray[np.float32], rows: NDArray[np.intp], *, head: int | None = None
) -> tuple[NDArray[np.intp], NDArray[np.float32], bool]:
    """The live ``rows`` best first, with their cosine to ``q``, and whether that is all of
    them.

    With ``head``, only the best ``head`` rows and any tied with the last of them: the
    start of the full order, the same rows in the same sequence (ties keep row order),
    without sorting a shortlist of thousands to read its first chunk.
    """
    rows = rows[index.live[rows]]
    sims = index.scores(rows, q)
    if head is not None and 0 < head < len(sims):
        cut = np.partition(sims, len(sims) - head)[len(sims) - head]
        best = np.flatnonzero(sims >= cut)
        order = best[np.argsort(-sims[best], kind="stable")]
        return rows[order], sims[order], False
    order = np.argsort(-sims, kind="stable")
    return rows[order], sims[order], True


def _scored(
    index: _OwnerIndex, rows: NDArray[np.intp], sims: NDArray[np.float32]
) -> list[tuple[str, float]]:
    """``(memory id, cosine)`` pairs for ranked rows (built only for the rows looked at)."""
    ids = index.ids
    return [(ids[r], s) for r, s in zip(rows.tolist(), sims.tolist(), strict=True)]
