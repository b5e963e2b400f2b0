"""Retrieval candidates from storage, restricted to one filter.

Searches return scores together with the rows they already read to check the filter; the
rows are kept per query and :meth:`StorageCandidateSource.hydrate` decrypts just the ones the
ranker asks for, so a query decrypts tens of memories, not hundreds, and reads each row once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from confide.embedders.base import Vector
from confide.index.codec import Contents
from confide.index.memory_text import occurred_at_of, speaker_of
from confide.index.vectors import ADJACENT
from confide.retrieval.bm25 import BM25Params
from confide.retrieval.ports import MemoryReader
from confide.retrieval.ranking import Candidate, Edge, EdgeKind
from confide.storage.base import EdgeRow, MemoryRow, ScoredId
from confide.types import Memory, MemoryFilter


class SharedScope:
    """Whether a request's ``include_shared`` reaches any other user's memory, asked once.

    A request may read with several filters narrowed from one (its ``context: all`` listing
    and its retrieval, on different threads); they share one existence check, made by
    whichever needs it first. Thread-safe.
    """

    def __init__(self, reader: MemoryReader, flt: MemoryFilter) -> None:
        self._reader = reader
        self._flt = flt
        self._reaches: bool | None = None
        self._lock = threading.Lock()

    def narrow(self, flt: MemoryFilter) -> MemoryFilter:
        """``flt`` (narrowed from the scope's filter) without its shared half when no other
        user's memory is in scope."""
        if not flt.include_shared:
            return flt
        with self._lock:
            if self._reaches is None:
                self._reaches = self._reader.has_others_shared(self._flt)
        return flt if self._reaches else flt.model_copy(update={"include_shared": False})


class StorageCandidateSource:
    """Implements :class:`confide.retrieval.query.CandidateSource` over a :class:`MemoryReader`.

    Every query goes to the database with the caller's filter, so a memory outside it
    (another user's private one, a forgotten one, a category the agent may not read) is
    never a candidate, not even as a neighbour. One source serves one query; the lexical
    search may run on a worker thread while the dense search runs on the caller's.
    """

    def __init__(
        self,
        reader: MemoryReader,
        flt: MemoryFilter,
        scope: SharedScope | None = None,
        *,
        vector_expected: bool = True,
    ) -> None:
        """``vector_expected``: whether the query will be embedded; only then do neighbours
        read before the query vector exists keep their stored vectors (for
        :meth:`with_dense`)."""
        self._reader = reader
        self._index = reader.search_index
        self._vector_expected = vector_expected
        self._requested = flt
        self._scope = scope or SharedScope(reader, flt)
        self._flt: MemoryFilter | None = None
        self._rows: dict[str, MemoryRow] = {}
        self._contents: dict[str, Contents] = {}
        self._vectors: dict[str, Vector] = {}
        # Edges (other end within the filter) of the memories whose neighbourhood was read.
        self._edges: dict[tuple[str, str], EdgeRow] = {}
        self._edges_read: set[str] = set()

    @property
    def flt(self) -> MemoryFilter:
        """The filter, without its shared half when no other user's memory can match it.

        The scope answers that once per request, for whichever search asks first (usually
        the lexical one, on a worker thread while the query is embedded).
        """
        if self._flt is None:
            self._flt = self._scope.narrow(self._requested)
        return self._flt

    def _keep(self, hits: Iterable[ScoredId]) -> None:
        for hit in hits:
            if hit.row is not None:
                self._rows[hit.memory_id] = hit.row

    def _opened(self, ids: Sequence[str]) -> dict[str, tuple[MemoryRow, Contents]]:
        """Rows and decrypted contents of the ids that match the filter (read at most once)."""
        missing = [i for i in ids if i not in self._rows]
        if missing:
            for fetched in self._reader.rows_in_filter(self.flt, missing):
                self._rows[fetched.id] = fetched
        out: dict[str, tuple[MemoryRow, Contents]] = {}
        for memory_id in ids:
            row = self._rows.get(memory_id)
            if row is None:
                continue
            contents = self._contents.get(memory_id)
            if contents is None:
                # A row that fails authentication is left out of the answer (and counted).
                opened = self._reader.try_open_contents(row)
                if opened is None:
                    continue
                contents = self._contents[memory_id] = opened
            out[memory_id] = (row, contents)
        return out

    def memory(self, memory_id: str) -> Memory | None:
        """The decrypted memory, if this query read it (hydrated) and it matches the filter."""
        row, contents = self._rows.get(memory_id), self._contents.get(memory_id)
        if row is None or contents is None:
            return None
        return self._reader.memory_of(row, contents)

    def load(self, ids: Sequence[str]) -> dict[str, Memory]:
        """Decrypt the memories among ``ids`` that match the filter."""
        return {i: self._reader.memory_of(r, c) for i, (r, c) in self._opened(ids).items()}

    def dense_candidates(self, vector: Vector, *, limit: int) -> list[Candidate]:
        """Nearest memories by cosine similarity (scores only)."""
        hits = self._index.vector_search(self.flt, vector, limit)
        self._keep(hits)
        return [Candidate(id=h.memory_id, dense=h.score) for h in hits]

    def lexical_candidates(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        """Best memories by BM25 over the blind tokens of ``query_terms`` (scores only)."""
        tokens = self._reader.blind_terms(self.flt.account_id, query_terms)
        hits = self._index.lexical_search(self.flt, tokens, limit, k1=params.k1, b=params.b)
        self._keep(hits)
        return [Candidate(id=h.memory_id, bm25=h.score) for h in hits]

    def common_terms(self, query_terms: Sequence[str], *, share: float, at_least: int) -> set[str]:
        """The terms among ``query_terms`` held by at least ``share`` of the owner's memories
        (the filter's user, or its account) and by ``at_least`` of them."""
        # The requested filter, not ``flt``: the owner is the same, and asking ``flt`` here
        # would pull the shared-memory check onto the query thread before the embedding.
        owner = self._requested
        tokens = self._reader.blind_terms(owner.account_id, query_terms)
        common = self._index.common_tokens(
            owner.account_id, owner.user_id, tokens, share=share, at_least=at_least
        )
        return {term for term, token in zip(query_terms, tokens, strict=True) if token in common}

    def hydrate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates with text, speaker, date, importance and pinning filled in."""
        opened = self._opened([c.id for c in candidates])
        return [
            row_candidate(*opened[c.id], dense=c.dense, bm25=c.bm25) if c.id in opened else c
            for c in candidates
        ]

    def neighbours(
        self, ids: Sequence[str], vector: Vector | None
    ) -> tuple[list[Candidate], list[Edge]]:
        """Edges of ``ids`` and the memories at their other ends (within the filter).

        Without ``vector`` the neighbours' stored vectors are kept, for :meth:`with_dense`
        to score them once the query is embedded (unless no query vector is expected).
        """
        keep_vectors = vector is None and self._vector_expected
        hood = self._index.neighbourhood(self.flt, ids, vector, with_vectors=keep_vectors)
        for row in hood.rows:
            self._rows[row.id] = row
        for edge in hood.edges:
            self._edges[(edge.from_id, edge.to_id)] = edge
        self._edges_read.update(ids)
        self._vectors.update(hood.vectors)
        edges = [
            Edge(
                a=r.from_id,
                b=r.to_id,
                kind=EdgeKind.ADJACENT if r.relation_type == ADJACENT else EdgeKind.SIMILAR,
                strength=r.strength,
            )
            for r in hood.edges
        ]
        ends = sorted(row.id for row in hood.rows)
        return [Candidate(id=i, dense=hood.similarity.get(i)) for i in ends], edges

    def edges_of(self, ids: Sequence[str]) -> list[EdgeRow]:
        """Edges touching ``ids``: for the ids whose neighbourhood :meth:`neighbours` read in
        this query, the edges it kept (other end within the filter), at no cost; for the
        others, every edge, read now (the ends' rows are for :meth:`load` to filter).

        The answers of a query are mostly the seeds whose edges it followed, so their related
        memories usually need no edges query of their own.
        """
        unread = [i for i in dict.fromkeys(ids) if i not in self._edges_read]
        known = set(ids).difference(unread)
        found = {key: e for key, e in self._edges.items() if e.from_id in known or e.to_id in known}
        if unread:
            for e in self._index.edges(self.flt.account_id, unread):
                found.setdefault((e.from_id, e.to_id), e)
        return list(found.values())

    def with_dense(self, candidates: Sequence[Candidate], vector: Vector) -> list[Candidate]:
        """The candidates with their cosine to ``vector`` filled in where it is missing."""
        unscored = [c.id for c in candidates if c.dense is None]
        if not unscored:
            return list(candidates)
        query = np.asarray(vector, dtype=np.float32)
        dense = {i: float(self._vectors[i] @ query) for i in unscored if i in self._vectors}
        unknown = [i for i in unscored if i not in dense]
        if unknown:
            dense.update(self._index.similarities(self.flt.account_id, unknown, vector))
        return [c if c.dense is not None else replace(c, dense=dense.get(c.id)) for c in candidates]


def row_candidate(
    row: MemoryRow, contents: Contents, *, dense: float | None = None, bm25: float | None = None
) -> Candidate:
    """A ranking candidate from a row and its decrypted contents (no :class:`Memory` built)."""
    return Candidate(
        id=row.id,
        text=contents.value,
        dense=dense,
        bm25=bm25,
        speaker=speaker_of(contents.metadata),
        created_at=occurred_at_of(contents.metadata, datetime.fromtimestamp(row.created_at, UTC)),
        importance=row.importance,
        pinned=bool(row.pinned),
        kind=row.type,
    )
