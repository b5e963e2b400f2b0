"""Retrieval candidates from storage, restricted to one filter.

Candidates come back with scores only; :meth:`StorageCandidateSource.hydrate` reads (and
decrypts) just the memories the ranker asks for, so a query decrypts tens of memories, not
hundreds.
"""

from __future__ import annotations

from collections.abc import Sequence

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
        """Decrypt the memories among ``ids`` that match the filter (cached per query)."""
        missing = [i for i in ids if i not in self.memories]
        if missing:
            for row in self.engine.storage.filter_memories(self.flt, missing):
                self.memories[row.id] = self.engine.open_row(row)
        return {i: self.memories[i] for i in ids if i in self.memories}

    def dense_candidates(self, vector: Vector, *, limit: int) -> list[Candidate]:
        """Nearest memories by cosine similarity (scores only)."""
        return [
            Candidate(id=h.memory_id, dense=h.score)
            for h in self.engine.storage.vector_search(self.flt, vector, limit)
        ]

    def lexical_candidates(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        """Best memories by BM25 over the blind tokens of ``query_terms`` (scores only)."""
        tokens = self.engine.lexical.hash_terms(self.flt.account_id, query_terms)
        hits = self.engine.storage.lexical_search(self.flt, tokens, limit, k1=params.k1, b=params.b)
        return [Candidate(id=h.memory_id, bm25=h.score) for h in hits]

    def hydrate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates with text, speaker, date, importance and pinning filled in."""
        found = self.load([c.id for c in candidates])
        return [
            as_candidate(found[c.id], dense=c.dense, bm25=c.bm25) if c.id in found else c
            for c in candidates
        ]

    def neighbours(
        self, ids: Sequence[str], vector: Vector | None
    ) -> tuple[list[Candidate], list[Edge]]:
        """Edges of ``ids`` and the memories at their other ends (within the filter)."""
        storage = self.engine.storage
        rows = storage.edges(self.flt.account_id, ids)
        ends = {r.to_id for r in rows} | {r.from_id for r in rows}
        allowed = storage.filter_ids(self.flt, sorted(ends))
        edges = [
            Edge(
                a=r.from_id,
                b=r.to_id,
                kind=EdgeKind.ADJACENT if r.relation_type == ADJACENT else EdgeKind.SIMILAR,
                strength=r.strength,
            )
            for r in rows
            if r.from_id in allowed and r.to_id in allowed
        ]
        dense: dict[str, float] = {}
        if vector is not None and allowed:
            dense = storage.similarities(self.flt.account_id, sorted(allowed), vector)
        return [Candidate(id=i, dense=dense.get(i)) for i in sorted(allowed)], edges
