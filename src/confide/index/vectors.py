"""The vector indexer: embeddings and relation edges written with each memory version.

Embedding happens before the write transaction (batched for ``store_many``); the vector and
the memory's edges are written inside it. On a store that searches vectors in process
(SQLite: :attr:`Capability.SEALED_VECTORS`) the vector is sealed under its owner's user key
(:class:`VectorSeal`) and opened when the owner's index is loaded, so an erasure makes it
unreadable with the rest of the user; PostgreSQL keeps pgvector's clear vectors to search
them in the database. Edges: ``related_to`` to the top-K most similar
active memories of the same owner with similarity at least ``link_min``, and ``adjacent``
to the previous memory of the same run (consecutive turns of one conversation).

A memory of a run is stored with the context of the turn before it: its vector is
``unit(embedding + run_context * stored vector of the previous memory of the run)``. A reply
such as "Yes, I loved it!" then sits near what it answers, and, since the previous vector
holds its own predecessor, each turn carries a fading trace of its conversation. The
query is embedded alone, so this costs nothing at query time and no second embedding at
write time (the previous memory's vector is in the batch or read back from the store).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from confide.crypto.aead import Cipher
from confide.crypto.envelope import index_snapshot_aad, vector_aad, vector_sealing_key
from confide.embedders.base import Embedder, Vector
from confide.errors import IndexerMissingError, IntegrityError, KeyUnavailableError
from confide.index.memory_text import indexed_text
from confide.keys.owner_keys import OwnerKeys
from confide.storage.base import (
    Capability,
    EdgeRow,
    IndexWrites,
    Page,
    SealedVector,
    Storage,
    StoredVector,
)
from confide.types import Memory, MemoryFilter

log = logging.getLogger(__name__)

PIPELINE_CHUNK = 8
"""The fewest texts embedded per step when a batch is pipelined (:meth:`VectorIndexer.prepare`)."""

_LATEST = Page(limit=2, offset=0, newest_first=True)
RELATED = "related_to"
ADJACENT = "adjacent"


@dataclass(frozen=True, slots=True)
class VectorEntry:
    """What :class:`VectorIndexer` writes for one memory version."""

    vector: Vector
    edges: list[EdgeRow] = field(default_factory=list)


class VectorSeal:
    """Seals embeddings under their owner's user key and opens them again (a storage
    ``VectorOpener``).

    Each vector is AES-GCM under a sub-key of the user key (:func:`vector_sealing_key`),
    bound to owner, memory version and embedder: a vector copied to another row or user does
    not open, and none opens once the user's key is destroyed.
    """

    def __init__(self, keys: OwnerKeys, cipher: Cipher) -> None:
        self._keys = keys
        self._cipher = cipher
        self._lock = threading.Lock()
        self.failures = 0
        """How many stored vectors failed to open since this seal was made."""

    def rebind(self, keys: OwnerKeys) -> None:
        """Use ``keys`` from now on (after a KEK rotation)."""
        self._keys = keys

    def seal(
        self, account_id: str, user_id: str, memory_id: str, model_id: str, vector: Vector
    ) -> SealedVector:
        """``vector`` of one memory version sealed under the current key of its owner."""
        key = self._keys.current(account_id, user_id)
        blob = self._cipher.seal(
            vector_sealing_key(key.raw),
            np.asarray(vector, dtype=np.float32).tobytes(),
            vector_aad(account_id, user_id, memory_id, model_id),
        )
        return SealedVector(key.key_id, blob)

    def open_vectors(
        self, account_id: str, user_id: str, rows: Sequence[StoredVector]
    ) -> list[bytes | None]:
        """Each row's vector as float32 bytes; ``None`` (counted, logged by count only) for a
        row that does not open. A row in clear (``key_id`` ``None``, from before vectors were
        sealed) is read as it is. Raises ``KeyUnavailableError`` when a key is wrapped under a
        KEK this process lacks (not the rows' fault)."""
        out: list[bytes | None] = [None] * len(rows)
        by_key: dict[str, list[int]] = {}
        for position, row in enumerate(rows):
            if row.key_id is None:
                out[position] = row.data
            else:
                by_key.setdefault(row.key_id, []).append(position)
        failed = 0
        for key_id, positions in by_key.items():
            try:
                raw = self._keys.by_id(account_id, user_id, key_id)
            except IntegrityError:
                failed += len(positions)  # the key was destroyed (erased) or never existed
                continue
            # Every row's AAD starts alike: that part is built once (a user's whole index is
            # opened here, and per-row string work cost as much as the decryption).
            prefix = vector_aad(account_id, user_id, "", "")[:-1]
            opened = self._cipher.open_many(
                vector_sealing_key(raw),
                [
                    (rows[p].data, prefix + f"{rows[p].memory_id}\x1f{rows[p].model_id}".encode())
                    for p in positions
                ],
            )
            for p, data in zip(positions, opened, strict=True):
                if data is None:
                    failed += 1
                out[p] = data
        if failed:
            with self._lock:
                self.failures += failed
            log.warning("%d stored vectors failed to open; left out of the index", failed)
        return out

    def seal_snapshot(self, account_id: str, user_id: str, data: bytes) -> SealedVector:
        """A snapshot of the user's in-process index sealed like their vectors (the same
        sub-key of the current user key), bound to the owner."""
        key = self._keys.current(account_id, user_id)
        blob = self._cipher.seal(
            vector_sealing_key(key.raw), data, index_snapshot_aad(account_id, user_id)
        )
        return SealedVector(key.key_id, blob)

    def open_snapshot(self, account_id: str, user_id: str, sealed: SealedVector) -> bytes | None:
        """A sealed index snapshot opened, or ``None`` (logged without detail) when its key is
        gone (an erasure) or it does not authenticate; the store then loads the rows."""
        try:
            raw = self._keys.by_id(account_id, user_id, sealed.key_id)
            return self._cipher.open(
                vector_sealing_key(raw), sealed.blob, index_snapshot_aad(account_id, user_id)
            )
        except KeyUnavailableError:
            raise  # a KEK this process lacks: not the snapshot's fault
        except IntegrityError:
            log.warning("a stored vector index snapshot failed to open; loading the rows")
            return None


class VectorIndexer:
    """Embeds memories and links them to their neighbours (an ``confide.index.lexical.Indexer``)."""

    def __init__(
        self,
        storage: Storage,
        embedder: Embedder,
        *,
        link_top_k: int = 5,
        link_min: float = 0.5,
        link_adjacent: bool = True,
        run_context: float = 0.6,
    ) -> None:
        self.storage = storage
        self.embedder = embedder
        self.link_top_k = link_top_k
        self.link_min = link_min
        self.link_adjacent = link_adjacent
        self.run_context = run_context
        self._seal: VectorSeal | None = None
        storage.bind_embedder(embedder.model_id, embedder.dims)

    @property
    def seals(self) -> bool:
        """Whether the store keeps vectors sealed (so this indexer needs :meth:`seal_with`)."""
        return Capability.SEALED_VECTORS in self.storage.capabilities

    def seal_with(self, seal: VectorSeal) -> None:
        """Seal vectors with ``seal`` (the engine's keys) and let the store open them.

        On a store that keeps vectors sealed, vectors an older version wrote in clear are
        sealed now (see :func:`seal_clear_vectors`).
        """
        self._seal = seal
        if self.seals:
            self.storage.bind_vector_opener(seal)
            seal_clear_vectors(self.storage, seal)

    def prepare(self, memories: Sequence[Memory]) -> list[VectorEntry]:
        """Embed every memory and find its edges (reads only; no transaction held).

        A large batch is embedded a chunk at a time on a helper thread while this thread
        searches the neighbours of the chunk before: the embedder releases the GIL, so the
        store-time similarity search costs no time of its own on a second core.
        """
        if not memories:
            return []
        texts = [indexed_text(m) for m in memories]
        vectors: np.ndarray | None = None
        entries: list[VectorEntry] = []
        position_of: dict[str, int] = {}
        for start, chunk in self._embedded(texts):
            if vectors is None:
                vectors = np.empty((len(texts), chunk.shape[1]), dtype=np.float32)
            vectors[start : start + len(chunk)] = chunk
            for position in range(start, start + len(chunk)):
                entries.append(self._entry(memories, position, vectors, position_of))
        return entries

    def _embedded(self, texts: Sequence[str]) -> Iterator[tuple[int, np.ndarray]]:
        """``(offset, vectors)`` of ``texts`` in order: in one call, or pipelined in chunks
        when there are enough texts and neighbours to search between them."""
        if self.link_top_k <= 0 or len(texts) < 2 * PIPELINE_CHUNK:
            yield 0, self.embedder.embed(texts)
            return
        # At most four chunks: a remote embedder pays a round trip per call.
        size = max(PIPELINE_CHUNK, -(-len(texts) // 4))
        ready: queue.Queue[tuple[int, np.ndarray] | BaseException | None] = queue.Queue()
        stop = threading.Event()

        def embed_chunks() -> None:
            try:
                for start in range(0, len(texts), size):
                    if stop.is_set():
                        return
                    ready.put((start, self.embedder.embed(texts[start : start + size])))
                ready.put(None)
            except BaseException as exc:  # handed to the caller's thread, raised there
                ready.put(exc)

        worker = threading.Thread(target=embed_chunks, name="confide-embed", daemon=True)
        worker.start()
        try:
            while (item := ready.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()

    def _entry(
        self,
        memories: Sequence[Memory],
        position: int,
        vectors: np.ndarray,
        position_of: dict[str, int],
    ) -> VectorEntry:
        """The vector and edges of ``memories[position]``, the batch's earlier vectors known
        (``position_of``: where each earlier memory of the batch is, by id)."""
        memory = memories[position]
        previous = None
        if memory.run_id is not None and (self.link_adjacent or self.run_context):
            previous = self._previous_in_run(memory, memories[:position])
        if self.run_context and previous is not None:
            before = vectors[position_of[previous]] if previous in position_of else None
            vectors[position] = self._in_context(memory, vectors[position], previous, before)
        position_of[memory.id] = position
        vector = vectors[position]
        edges = self._related(memory, vector, memories[:position], vectors[:position])
        if self.link_adjacent and previous is not None:
            # One edge per (from, to) pair is stored; edges are undirected for ranking, so a
            # similarity link to the previous turn goes the other way rather than silently
            # dropping the adjacency.
            edges = [
                EdgeRow(e.to_id, e.from_id, e.relation_type, e.strength)
                if e.to_id == previous
                else e
                for e in edges
            ]
            edges.append(EdgeRow(memory.id, previous, ADJACENT, 1.0))
        return VectorEntry(vector=vector, edges=edges)

    def write(self, tx: IndexWrites, memory: Memory, prepared: VectorEntry) -> None:
        """Store the vector (sealed where the store keeps vectors sealed) and the edges."""
        model_id = self.embedder.model_id
        if self.seals:
            if self._seal is None:
                raise IndexerMissingError(
                    "this store keeps vectors sealed under their owner's key; add the vector "
                    "indexer to an engine (MemoryEngine.add_indexer), which gives it the keys"
                )
            sealed = self._seal.seal(
                memory.account_id, memory.user_id, memory.id, model_id, prepared.vector
            )
            tx.put_vector(memory.id, memory.account_id, memory.user_id, model_id, sealed)
        else:
            tx.put_vector(memory.id, memory.account_id, memory.user_id, model_id, prepared.vector)
        if prepared.edges:
            tx.put_edges(memory.account_id, memory.user_id, prepared.edges)

    def _in_context(
        self, memory: Memory, vector: np.ndarray, previous: str, before: Vector | None
    ) -> np.ndarray:
        """``vector`` moved towards the stored vector of the previous memory of its run.

        ``before`` is that vector when the previous memory is in the batch (already in
        context); otherwise it is read from the store. Without one (a store without vectors
        yet, a previous memory a reindex has not reached) the memory is embedded alone.
        """
        if before is None:
            before = self.storage.vectors(memory.account_id, [previous]).get(previous)
        if before is None or len(before) != len(vector):
            return vector
        return in_context(vector, before, self.run_context)

    def _related(
        self,
        memory: Memory,
        vector: Vector,
        batch: Sequence[Memory],
        batch_vectors: np.ndarray,
    ) -> list[EdgeRow]:
        if self.link_top_k <= 0:
            return []
        flt = MemoryFilter(account_id=memory.account_id, user_id=memory.user_id)
        scored = [
            (hit.memory_id, hit.score)
            for hit in self.storage.vector_search(flt, vector, self.link_top_k + 1)
            if hit.memory_id not in (memory.id, memory.supersedes_id)
        ]
        if len(batch):
            sims = batch_vectors @ vector
            scored += [
                (other.id, float(sim))
                for other, sim in zip(batch, sims, strict=True)
                if other.user_id == memory.user_id and other.account_id == memory.account_id
            ]
        best = sorted((s for s in scored if s[1] >= self.link_min), key=lambda s: -s[1])[
            : self.link_top_k
        ]
        return [EdgeRow(memory.id, other, RELATED, round(score, 4)) for other, score in best]

    def _previous_in_run(self, memory: Memory, batch: Sequence[Memory]) -> str | None:
        for other in reversed(batch):
            if other.run_id == memory.run_id and other.user_id == memory.user_id:
                return other.id
        # Stored before it: a live write is the run's newest anyway, and a reindex (oldest
        # first) finds the predecessor it has just re-written, not a later turn of the run.
        flt = MemoryFilter(
            account_id=memory.account_id,
            user_id=memory.user_id,
            run_id=memory.run_id,
            created_before=memory.created_at,
        )
        for row in self.storage.list_memories(flt, _LATEST):
            if row.id not in (memory.id, memory.supersedes_id):
                return row.id
        return None


def in_context(vector: Vector, before: Vector, weight: float) -> np.ndarray:
    """``unit(vector + weight * before)``: a memory's vector in the context of the stored
    vector of the previous memory of its run (``vector`` itself if the sum is zero)."""
    mixed = np.asarray(vector, dtype=np.float32) + weight * np.asarray(before, dtype=np.float32)
    norm = float(np.linalg.norm(mixed))
    return mixed / norm if norm > 0 else np.asarray(vector, dtype=np.float32)


def require_vector_indexer(storage: Storage, indexers: Sequence[object]) -> None:
    """Refuse a write the store's vector index would miss.

    A store with a bound embedder expects every memory version to come with its vector and
    edges; an engine without a :class:`VectorIndexer` (opened bare) would write versions that
    similarity search never finds. Raises :class:`IndexerMissingError`.
    """
    if any(isinstance(indexer, VectorIndexer) for indexer in indexers):
        return
    spec = storage.embedder_spec()
    if spec is not None:
        raise IndexerMissingError(
            f"this store is indexed with embedder {spec}, but this engine makes no vectors; "
            "open it with its embedder to write (Confide.open, or Confide(engine, embedder=...)), "
            "or run 'confide reindex' to re-index it with the configured embedder"
        )


def seal_clear_vectors(storage: Storage, seal: VectorSeal, *, batch: int = 1000) -> int:
    """Seal the vectors an older version stored in clear (the upgrade of the memory store's
    ``sealed-vectors`` step); returns how many. Each batch is one transaction; run again, it
    finishes what is left. The clear originals are overwritten in place (``secure_delete``
    zeroes the old cells) and the WAL, which still holds them, is folded and truncated at
    the end."""
    done = 0
    while True:
        rows = storage.clear_vectors(batch)
        if not rows:
            break
        sealed = []
        for memory_id, account_id, user_id, model_id, vector in rows:
            sealed.append((memory_id, seal.seal(account_id, user_id, memory_id, model_id, vector)))
        with storage.transaction() as tx:
            tx.across_accounts()  # the upgrade of an older store covers every account
            tx.seal_vectors_in_place(sealed)
        done += len(rows)
        if len(rows) < batch:
            break
    if done:
        storage.scrub()
    return done
