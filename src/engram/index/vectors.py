"""The vector indexer: embeddings and relation edges written with each memory version.

Embedding happens before the write transaction (batched for ``store_many``); the vector and
the memory's edges are written inside it. Edges: ``related_to`` to the top-K most similar
active memories of the same owner with similarity at least ``link_min``, and ``adjacent``
to the previous memory of the same run (consecutive turns of one conversation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from engram.embedders.base import Embedder, Vector
from engram.errors import IndexerMissingError
from engram.index.memory_text import indexed_text
from engram.storage.base import EdgeRow, IndexWrites, Page, Storage
from engram.types import Memory, MemoryFilter

_LATEST = Page(limit=2, offset=0, newest_first=True)
RELATED = "related_to"
ADJACENT = "adjacent"


@dataclass(frozen=True, slots=True)
class VectorEntry:
    """What :class:`VectorIndexer` writes for one memory version."""

    vector: Vector
    edges: list[EdgeRow] = field(default_factory=list)


class VectorIndexer:
    """Embeds memories and links them to their neighbours (an ``engram.index.lexical.Indexer``)."""

    def __init__(
        self,
        storage: Storage,
        embedder: Embedder,
        *,
        link_top_k: int = 5,
        link_min: float = 0.5,
        link_adjacent: bool = True,
    ) -> None:
        self.storage = storage
        self.embedder = embedder
        self.link_top_k = link_top_k
        self.link_min = link_min
        self.link_adjacent = link_adjacent
        storage.bind_embedder(embedder.model_id, embedder.dims)

    def prepare(self, memories: Sequence[Memory]) -> list[VectorEntry]:
        """Embed every memory and find its edges (reads only; no transaction held)."""
        if not memories:
            return []
        vectors = self.embedder.embed([indexed_text(m) for m in memories])
        entries = []
        for position, (memory, vector) in enumerate(zip(memories, vectors, strict=True)):
            edges = self._related(memory, vector, memories[:position], vectors[:position])
            if self.link_adjacent and memory.run_id is not None:
                previous = self._previous_in_run(memory, memories[:position])
                if previous is not None:
                    # One edge per (from, to) pair is stored; edges are undirected for
                    # ranking, so a similarity link to the previous turn goes the other way
                    # rather than silently dropping the adjacency.
                    edges = [
                        EdgeRow(e.to_id, e.from_id, e.relation_type, e.strength)
                        if e.to_id == previous
                        else e
                        for e in edges
                    ]
                    edges.append(EdgeRow(memory.id, previous, ADJACENT, 1.0))
            entries.append(VectorEntry(vector=vector, edges=edges))
        return entries

    def write(self, tx: IndexWrites, memory: Memory, prepared: VectorEntry) -> None:
        """Store the vector and the edges."""
        tx.put_vector(
            memory.id, memory.account_id, memory.user_id, self.embedder.model_id, prepared.vector
        )
        if prepared.edges:
            tx.put_edges(memory.account_id, memory.user_id, prepared.edges)

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
        flt = MemoryFilter(
            account_id=memory.account_id, user_id=memory.user_id, run_id=memory.run_id
        )
        for row in self.storage.list_memories(flt, _LATEST):
            if row.id not in (memory.id, memory.supersedes_id):
                return row.id
        return None


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
            "open it with its embedder to write (Engram.open, or Engram(engine, embedder=...)), "
            "or run 'engram reindex' to re-index it with the configured embedder"
        )
