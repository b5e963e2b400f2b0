"""Retrieval candidates from storage, restricted to one filter, decrypted for the ranker."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram.engine import MemoryEngine
from engram.retrieval.bm25 import BM25Params
from engram.retrieval.embedders.base import Vector
from engram.retrieval.indexer import ADJACENT
from engram.retrieval.memory_text import as_candidate
from engram.retrieval.ranking import Candidate, Edge, EdgeKind
from engram.types import Memory, MemoryFilter


class StorageCandidateSource:
    """Implements :class:`engram.retrieval.query.CandidateSource` over the engine's storage.

    Every query goes to the database with the caller's filter, so a memory outside it
    (another user's private one, a forgotten one, a category the agent may not read) is
    never a candidate, not even as a neighbour.
    """

    def __init__(self, engine: MemoryEngine, flt: MemoryFilter) -> None:
        self.engine = engine
        self.flt = flt
        self.memories: dict[str, Memory] = {}

    def load(self, ids: Sequence[str]) -> dict[str, Memory]:
        missing = [i for i in ids if i not in self.memories]
        if missing:
            for row in self.engine.storage.filter_memories(self.flt, missing):
                self.memories[row.id] = self.engine.open_row(row)
        return {i: self.memories[i] for i in ids if i in self.memories}

    def dense_candidates(self, vector: Vector, *, limit: int) -> list[Candidate]:
        """Nearest memories by cosine similarity."""
        hits = self.engine.storage.vector_search(self.flt, vector, limit)
        found = self.load([h.memory_id for h in hits])
        return [
            as_candidate(found[h.memory_id], dense=h.score) for h in hits if h.memory_id in found
        ]

    def lexical_candidates(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        """Best memories by BM25 over the blind tokens of ``query_terms``."""
        tokens = self.engine.lexical.hash_terms(self.flt.account_id, query_terms)
        hits = self.engine.storage.lexical_search(self.flt, tokens, limit, k1=params.k1, b=params.b)
        found = self.load([h.memory_id for h in hits])
        return [
            as_candidate(found[h.memory_id], bm25=h.score) for h in hits if h.memory_id in found
        ]

    def neighbours(
        self, ids: Sequence[str], vector: Vector | None
    ) -> tuple[list[Candidate], list[Edge]]:
        """Edges of ``ids`` and the memories at their other ends (within the filter)."""
        rows = self.engine.storage.edges(self.flt.account_id, ids)
        others = list({r.to_id for r in rows} | {r.from_id for r in rows})
        found = self.load(others)
        edges = [
            Edge(
                a=r.from_id,
                b=r.to_id,
                kind=EdgeKind.ADJACENT if r.relation_type == ADJACENT else EdgeKind.SIMILAR,
                strength=r.strength,
            )
            for r in rows
            if r.from_id in found and r.to_id in found
        ]
        dense: dict[str, float] = {}
        if vector is not None and found:
            stored = self.engine.storage.vectors(self.flt.account_id, list(found))
            q = np.asarray(vector, dtype=np.float32)
            dense = {i: float(v @ q) for i, v in stored.items()}
        return [as_candidate(m, dense=dense.get(i)) for i, m in found.items()], edges
