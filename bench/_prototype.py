"""An in-memory prototype of Confide's candidate generation, for the LoCoMo harness.

It implements :class:`confide.retrieval.query.CandidateSource` with numpy (dense) and the
retrieval package's BM25, and links memories the way the engine will at store time:
``adjacent`` edges between consecutive turns of one session and ``similar`` edges to the
top-K earlier memories with cosine >= ``link_min``. The harness reaches it only through
:class:`ConfideSide`, to be switched to the real ``MemoryEngine`` once storage lands.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from _locomo_data import Turn
from confide.config import Settings
from confide.embedders import Embedder
from confide.embedders.local import LocalMiniLMEmbedder
from confide.index.memory_text import index_text, part_spans
from confide.index.tokenize import terms
from confide.index.vectors import in_context
from confide.retrieval.bm25 import BM25Params, bm25_idf, bm25_term_weight
from confide.retrieval.query import QueryPlan, retrieve
from confide.retrieval.ranking import Candidate, Edge, EdgeKind, RankingWeights


def memory_value(turn: Turn) -> str:
    """The memory's value: the turn's text, and the caption of a shared image if any."""
    return f"{turn.text} [image: {turn.caption}]" if turn.caption else turn.text


def memory_text(turn: Turn) -> str:
    """What is indexed: ``(date) Speaker: value`` (see :func:`index_text`)."""
    return index_text(memory_value(turn), speaker=turn.speaker, when=turn.date)


@dataclass(frozen=True)
class LinkParams:
    """Store-time linking: ``top_k`` earlier memories with cosine >= ``link_min``; each
    turn's vector carries ``run_context`` times the previous turn's of its session, as the
    engine's vector indexer stores it (``CONFIDE_RUN_CONTEXT``). ``part_min_words`` > 0 also
    keeps a vector per sentence of that many words or more (late-chunked from the turn's
    own pass, :meth:`LocalMiniLMEmbedder.embed_spans`); a candidate's dense score is then
    the best of its turn's and its sentences' (an experiment: the engine does not store
    sentence vectors)."""

    top_k: int = 5
    link_min: float = 0.5
    run_context: float = Settings.model_fields["run_context"].default
    part_min_words: int = 0


class InMemorySource:
    """One user's memories, held in memory; a :class:`CandidateSource`."""

    def __init__(self, links: LinkParams) -> None:
        self.links = links
        self.turns: list[Turn] = []
        self.values: list[str] = []
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        # Sentence vectors and the turn each belongs to (``links.part_min_words``).
        self.part_vectors = np.zeros((0, 0), dtype=np.float32)
        self.part_owner = np.zeros(0, dtype=np.int64)
        self.doc_terms: list[Counter[str]] = []
        self.doc_freq: Counter[str] = Counter()
        self.total_len = 0
        self.edges: dict[int, list[Edge]] = {}
        # Candidate lists by query: a parameter search asks the same questions many times.
        self._memo: dict[tuple[object, ...], list[Candidate]] = {}

    def add(
        self, turns: Sequence[Turn], vectors: np.ndarray, parts: Sequence[np.ndarray] = ()
    ) -> None:
        """Store turns with their vectors, each put in the context of the turn before it in
        its session (``links.run_context``), and link them (adjacency and similarity).
        ``parts`` holds each turn's sentence vectors, if any."""
        start = len(self.turns)
        new = [(start + offset, rows) for offset, rows in enumerate(parts) if len(rows)]
        if new:
            kept = [self.part_vectors] if len(self.part_owner) else []
            self.part_vectors = np.vstack([*kept, *(rows for _, rows in new)]).astype(np.float32)
            owners = [turn for turn, rows in new for _ in range(len(rows))]
            self.part_owner = np.concatenate([self.part_owner, owners]).astype(np.int64)
        vectors = np.array(vectors, dtype=np.float32)
        context = self.links.run_context
        for offset, turn in enumerate(turns):
            if not context or start + offset == 0:
                continue
            previous = turns[offset - 1] if offset else self.turns[-1]
            if previous.session == turn.session:
                # The previous vector is already in context itself (as the engine stores it).
                before = vectors[offset - 1] if offset else self.vectors[-1]
                vectors[offset] = in_context(vectors[offset], before, context)
        self.vectors = vectors if start == 0 else np.vstack([self.vectors, vectors])
        for offset, turn in enumerate(turns):
            i = start + offset
            self.turns.append(turn)
            self.values.append(memory_value(turn))
            counts = Counter(terms(memory_text(turn)))
            self.doc_terms.append(counts)
            self.doc_freq.update(counts.keys())
            self.total_len += sum(counts.values())
            if i > 0 and self.turns[i - 1].session == turn.session:
                self._link(i - 1, i, EdgeKind.ADJACENT, 1.0)
            if i > 0 and self.links.top_k:
                sims = self.vectors[:i] @ self.vectors[i]
                for j in np.argsort(-sims)[: self.links.top_k]:
                    if sims[j] >= self.links.link_min:
                        self._link(int(j), i, EdgeKind.SIMILAR, float(sims[j]))

    def _link(self, a: int, b: int, kind: EdgeKind, strength: float) -> None:
        edge = Edge(a=str(a), b=str(b), kind=kind, strength=strength)
        self.edges.setdefault(a, []).append(edge)
        self.edges.setdefault(b, []).append(edge)

    def _candidate(
        self, i: int, *, dense: float | None = None, bm25: float | None = None
    ) -> Candidate:
        t = self.turns[i]
        return Candidate(
            id=str(i),
            text=self.values[i],
            dense=dense,
            bm25=bm25,
            speaker=t.speaker,
            created_at=t.date,
        )

    def _similarities(self, vector: np.ndarray) -> np.ndarray:
        """Each turn's cosine to ``vector``: the best of its own and its sentences'."""
        sims: np.ndarray = self.vectors @ vector
        if len(self.part_owner):
            best = np.full(len(sims), -1.0, dtype=np.float32)
            np.maximum.at(best, self.part_owner, self.part_vectors @ vector)
            sims = np.maximum(sims, best)
        return sims

    def dense_candidates(self, vector: np.ndarray, *, limit: int) -> list[Candidate]:
        """Exact nearest neighbours by the turns' vectors (the SQL backends use an ANN
        index), scored with their sentences' as well."""
        key = ("dense", vector.tobytes(), limit, len(self.turns))
        if key not in self._memo:
            top = np.argsort(-(self.vectors @ vector))[:limit]
            sims = self._similarities(vector)
            self._memo[key] = [self._candidate(int(i), dense=float(sims[i])) for i in top]
        return self._memo[key]

    def lexical_candidates(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        """BM25 over the documents holding at least one query term."""
        key = ("bm25", tuple(query_terms), limit, params, len(self.turns))
        if key not in self._memo:
            self._memo[key] = self._bm25(query_terms, limit=limit, params=params)
        return self._memo[key]

    def _bm25(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        n = len(self.turns)
        avg = self.total_len / n if n else 0.0
        q = Counter(query_terms)
        idf = {t: bm25_idf(self.doc_freq.get(t, 0), n) for t in q}
        scored: list[tuple[float, int]] = []
        for i, counts in enumerate(self.doc_terms):
            length = sum(counts.values())
            s = sum(
                qn * bm25_term_weight(counts.get(t, 0), length, avg, idf[t], params)
                for t, qn in q.items()
            )
            if s > 0:
                scored.append((s, i))
        scored.sort(reverse=True)
        return [self._candidate(i, bm25=s) for s, i in scored[:limit]]

    def common_terms(self, query_terms: Sequence[str], *, share: float, at_least: int) -> set[str]:
        """Terms held by at least ``share`` of the memories and by ``at_least`` of them."""
        need = max(at_least, share * len(self.turns))
        return {t for t in query_terms if self.doc_freq.get(t, 0) >= need}

    def hydrate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Candidates here always carry their text already."""
        return list(candidates)

    def neighbours(
        self, ids: Sequence[str], vector: np.ndarray | None
    ) -> tuple[list[Candidate], list[Edge]]:
        """Edges of the seeds and the memories at their other ends."""
        edges = [e for i in ids for e in self.edges.get(int(i), [])]
        others = {int(e.a) for e in edges} | {int(e.b) for e in edges}
        sims = self._similarities(vector) if vector is not None else None
        cands = [
            self._candidate(j, dense=float(sims[j]) if sims is not None else None)
            for j in sorted(others)
        ]
        return cands, edges

    def with_dense(self, candidates: Sequence[Candidate], vector: np.ndarray) -> list[Candidate]:
        """Cosine filled in for candidates read without the query vector."""
        sims = self._similarities(vector)
        return [
            c if c.dense is not None else replace(c, dense=float(sims[int(c.id)]))
            for c in candidates
        ]


class ConfideSide:
    """The narrow adapter the harness talks to: ingest turns, query for turn ids.

    Today it stores into :class:`InMemorySource`; later ``ingest`` becomes
    ``engine.store_many([NewMemory(...)])`` and ``query`` the engine's memory query.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        weights: RankingWeights | None = None,
        links: LinkParams | None = None,
        plan: QueryPlan | None = None,
        ingest_embedder: Embedder | None = None,
        part_embedder: LocalMiniLMEmbedder | None = None,
    ) -> None:
        self.embedder = embedder
        self.ingest_embedder = ingest_embedder or embedder
        self.part_embedder = part_embedder
        self.weights = weights or RankingWeights()
        self.links = links or LinkParams()
        self.plan = plan or QueryPlan()
        self.users: dict[str, InMemorySource] = {}

    def ingest(self, conv_id: str, turns: Sequence[Turn]) -> None:
        """Store one conversation's turns as memories of the user ``conv_id``."""
        source = self.users.setdefault(conv_id, InMemorySource(self.links))
        texts = [memory_text(t) for t in turns]
        parts: list[np.ndarray] = []
        if self.links.part_min_words:
            if self.part_embedder is None:
                raise ValueError("sentence vectors (part_min_words) need a part_embedder")
            spans = [
                part_spans(text, memory_value(t), min_words=self.links.part_min_words)
                for text, t in zip(texts, turns, strict=True)
            ]
            parts = self.part_embedder.embed_spans(texts, spans)[1]
        source.add(turns, self.ingest_embedder.embed(texts), parts)

    def query(self, conv_id: str, question: str, k: int) -> list[str]:
        """The dialogue ids of the top ``k`` memories for a question."""
        source = self.users[conv_id]
        ranked = retrieve(
            source,
            question,
            embedder=self.embedder,
            limit=k,
            weights=self.weights,
            plan=self.plan,
        )
        return [source.turns[int(s.candidate.id)].dia_id for s in ranked]
