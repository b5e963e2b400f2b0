"""The query path: candidates from storage, fused and re-ranked by :mod:`ranking`.

:class:`CandidateSource` is the narrow interface a storage backend offers retrieval; the
in-memory prototype in ``bench/`` and the SQL backends implement the same methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Generic, ParamSpec, Protocol, TypeVar

from confide.embedders.base import Embedder, Vector
from confide.index.tokenize import terms
from confide.retrieval.bm25 import BM25Params
from confide.retrieval.features import neutral_question, query_features, question_name_terms
from confide.retrieval.ranking import (
    Candidate,
    Edge,
    RankingWeights,
    ScoredCandidate,
    base_scores,
    rank,
)

__all__ = [
    "COMMON_NAME_MIN",
    "QUERY_WORKERS",
    "CandidateSource",
    "Handed",
    "QueryPlan",
    "embedded_question",
    "hand",
    "retrieve",
    "use_workers",
    "workers",
]

COMMON_NAME_MIN = 20
"""A name must be in at least this many memories to be common (besides the share): in a
handful of memories a share says nothing, and a place named in two of five is what the
question is about."""


def embedded_question(source: CandidateSource, query: str, weights: RankingWeights) -> str:
    """The text embedded for ``query``: the question with the names common in the user's
    memories replaced (:func:`confide.retrieval.features.neutral_question`), unless that
    leaves no search term at all."""
    if not weights.common_name_share:
        return query
    names = question_name_terms(query)
    if not names:
        return query
    common = source.common_terms(
        sorted(names), share=weights.common_name_share, at_least=COMMON_NAME_MIN
    )
    neutral = neutral_question(query, common)
    # A question of nothing but common names ("Porto?") keeps them: "they" finds nothing.
    return neutral if terms(neutral) else query


class CandidateSource(Protocol):
    """What retrieval needs from storage, already restricted to the caller's filter.

    Every method returns :class:`Candidate` objects with ``text``, ``speaker``,
    ``created_at``, ``importance`` and ``pinned`` filled in from the (decrypted) memory.
    """

    def dense_candidates(self, vector: Vector, *, limit: int) -> list[Candidate]:
        """The ``limit`` nearest memories by cosine similarity, ``dense`` filled in."""
        ...

    def lexical_candidates(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        """The ``limit`` best memories by BM25 over ``query_terms``, ``bm25`` filled in.

        Storage hashes the terms with its key before looking them up and may compute the
        score with :func:`confide.retrieval.bm25.bm25_score`.
        """
        ...

    def common_terms(self, query_terms: Sequence[str], *, share: float, at_least: int) -> set[str]:
        """The terms among ``query_terms`` held by at least ``share`` of the owner's memories
        (the filter's user, or its account; other filters do not narrow the count) and by
        ``at_least`` of them."""
        ...

    def neighbours(
        self, ids: Sequence[str], vector: Vector | None
    ) -> tuple[list[Candidate], list[Edge]]:
        """Edges touching ``ids`` and the memories at their other ends.

        The returned candidates carry ``dense`` (cosine to ``vector``) when a vector is given.
        """
        ...

    def hydrate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The same candidates with the memory's fields (text, speaker, date...) filled in.

        Sources may return candidates with scores only and fill them in here, so only the
        few that can reach the top are read (decrypted).
        """
        ...

    def with_dense(self, candidates: Sequence[Candidate], vector: Vector) -> list[Candidate]:
        """The same candidates with ``dense`` (cosine to ``vector``) filled in where missing.

        Neighbours read without a vector (before the query was embedded) are scored here.
        """
        ...


@dataclass(frozen=True, kw_only=True)
class QueryPlan:
    """How many candidates to ask storage for."""

    dense_limit: int = 100
    lexical_limit: int = 100
    bm25: BM25Params = field(default_factory=BM25Params)
    hydrate_top: int = 40
    """Candidates read in full (for text features) before the edges are followed."""
    expand_top: int | None = None
    """At most this many seeds have their edges followed (``None``: ``weights.expand_top``)."""
    early_expand_top: int | None = None
    """This many of the best lexical hits have their edges read while the question is
    embedded (``None``: as many as seeds are followed; none when no edges are followed); the
    seeds chosen after fusion whose edges were not read then are read after the embedding.
    The answer is the same."""
    lexical_hydrate_top: int | None = None
    """This many of the best lexical hits are read in full on the worker while the question
    is embedded (``None``: ``hydrate_top``); those the fused order needs that were not are
    read by the caller after the embedding. The answer is the same."""


def _merge(lists: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """One candidate per id, keeping every score found and the hydrated fields if any."""
    merged: dict[str, Candidate] = {}
    for candidates in lists:
        for c in candidates:
            prior = merged.get(c.id)
            if prior is None:
                merged[c.id] = c
                continue
            full = prior if prior.text or not c.text else c
            merged[c.id] = replace(
                full,
                dense=prior.dense if prior.dense is not None else c.dense,
                bm25=prior.bm25 if prior.bm25 is not None else c.bm25,
            )
    return list(merged.values())


QUERY_WORKERS = 1
"""Threads of the query path's shared pool unless the wiring sizes it for its store
(:func:`use_workers`). On SQLite the tasks are Python under the GIL and reads in this
process, and a query runs the tasks no worker has started itself (:class:`Handed`), so on two
cores a second thread only contends: one answered a question faster than two, and two faster
than four (``bench/scale.py --compare query-workers=2``; docs/retrieval.md "Settings
measured")."""

_executor: ThreadPoolExecutor | None = None
_worker_count = QUERY_WORKERS
_executor_lock = threading.Lock()


def workers() -> ThreadPoolExecutor:
    """The shared worker threads of the query path (made on first use, not at import)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=_worker_count, thread_name_prefix="confide-query"
            )
        return _executor


def use_workers(count: int) -> None:
    """Give the query path's shared pool ``count`` threads from its next task on.

    A pool of another size made already is let go: the tasks it holds still run, and the
    queries waiting on them get their answers.
    """
    global _executor, _worker_count
    if count < 1:
        raise ValueError("the query path needs at least one worker")
    with _executor_lock:
        if count == _worker_count:
            return
        _worker_count = count
        replaced, _executor = _executor, None
    if replaced is not None:
        replaced.shutdown(wait=False)


P = ParamSpec("P")
T = TypeVar("T")

_run_unstarted = True
"""Whether the thread that needs a handed task's result runs the task itself when no worker
has started it yet (``bench/scale.py --compare waiting=idle`` turns it off in one arm)."""


class Handed(Generic[T]):
    """A task handed to the query path's workers (:func:`hand`).

    A query hands its workers more tasks than they have threads (the lexical search, the
    edges of seeds, the ``context: all`` listing, the delta header's check), so one may still
    sit in the queue when the thread that needs it is ready for it. That thread then takes
    it back and runs it itself instead of waiting for a worker to start it.
    """

    def __init__(self, task: Callable[[], T]) -> None:
        self._task = task
        self._future: Future[T] = workers().submit(task)
        self._taken_back: Future[T] | None = None
        self._lock = threading.Lock()

    def result(self) -> T:
        """The task's result (or its exception), run here if no worker has started it.

        The task runs once however often and from however many threads this is asked.
        """
        with self._lock:
            if self._taken_back is None and _run_unstarted and self._future.cancel():
                self._taken_back = Future()
                try:
                    self._taken_back.set_result(self._task())
                except BaseException as exc:  # to each caller, as the worker's future does
                    self._taken_back.set_exception(exc)
        if self._taken_back is not None:
            return self._taken_back.result()
        return self._future.result()


def hand(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Handed[T]:
    """Start ``fn(*args, **kwargs)`` on the query path's workers (see :class:`Handed`)."""
    return Handed(partial(fn, *args, **kwargs))


def _hydrated(
    source: CandidateSource, pool: list[Candidate], ids: Sequence[str]
) -> list[Candidate]:
    """``pool`` with the candidates among ``ids`` read in full."""
    wanted = set(ids)
    # A candidate read in full already (``kind`` is set) would come back the same.
    unread = [c for c in pool if c.id in wanted and c.kind is None]
    if not unread:
        return pool
    filled = {c.id: c for c in source.hydrate(unread)}
    return [filled.get(c.id, c) for c in pool]


Expansion = tuple[list[Candidate], list[Edge]]


@dataclass(frozen=True)
class _LexicalSide:
    found: list[Candidate]
    seeds: list[str]
    expansion: Handed[Expansion] | None


def _lexical_side(
    source: CandidateSource, query_terms: Sequence[str], plan: QueryPlan, early: int
) -> _LexicalSide:
    """BM25 candidates, the best of them hydrated, and the edges of the best ``early``.

    This runs while the query is embedded. The best lexical hits are likely seeds, so their
    edges are read now, on another worker while this one decrypts, and their neighbours
    are scored once the query vector exists. (Worker tasks never wait on each other, so
    they cannot deadlock.)
    """
    found = source.lexical_candidates(query_terms, limit=plan.lexical_limit, params=plan.bm25)
    seeds = [c.id for c in found[:early]]
    expansion = hand(source.neighbours, seeds, None) if seeds else None
    read = plan.hydrate_top
    if plan.lexical_hydrate_top is not None:
        read = min(read, plan.lexical_hydrate_top)
    hydrated = source.hydrate(found[:read]) + found[read:]
    return _LexicalSide(hydrated, seeds, expansion)


def retrieve(
    source: CandidateSource,
    query: str,
    *,
    embedder: Embedder | None,
    limit: int = 10,
    weights: RankingWeights | None = None,
    plan: QueryPlan | None = None,
    on_embedded: Callable[[], None] | None = None,
) -> list[ScoredCandidate]:
    """Hybrid retrieval: dense + BM25 candidates, fusion, boosts and edge propagation.

    Candidates arrive with scores only; the best ``plan.hydrate_top`` by fused score are read
    in full for the text boosts while the edges of the best ``weights.expand_top`` (at most
    ``plan.expand_top``) by fused score are followed, and the final top ``limit`` are read in
    full before the last ordering. Without an embedder the dense side is skipped (BM25 and
    boosts still rank). ``on_embedded`` is called once the question is embedded (at once
    without an embedder), before the dense search: the time for a caller to start reads of
    its own that should not compete with the embedding for a core.
    """
    w = weights or RankingWeights()
    p = plan or QueryPlan()
    features = query_features(query)
    query_terms = terms(query)
    expand = w.expand_top if p.expand_top is None else min(w.expand_top, p.expand_top)
    if not (w.w_adjacent or w.w_related):
        expand = 0
    # The lexical search needs no embedding: it runs (and decrypts its best hits, and reads
    # their edges) on workers while this thread embeds the query (ONNX and the database
    # drivers release the GIL).
    pending: Handed[_LexicalSide] | None = None
    if query_terms:
        read_now = expand if p.early_expand_top is None or not expand else p.early_expand_top
        pending = hand(_lexical_side, source, query_terms, p, read_now)
    vector = None
    if embedder is not None:
        vector = embedder.embed_one(embedded_question(source, query, w))
    if on_embedded is not None:
        on_embedded()
    lists: list[list[Candidate]] = []
    if vector is not None:
        lists.append(source.dense_candidates(vector, limit=p.dense_limit))
    lexical = pending.result() if pending is not None else None
    if lexical is not None:
        lists.append(lexical.found)
    pool = _merge(lists)
    if not pool:
        return []
    # Which memories to read in full and whose edges to follow is decided on the fused score
    # alone, so the edges the lexical side did not read are read on a worker while this
    # thread decrypts.
    fused = base_scores(pool, w)
    by_fused = [pool[i].id for i in sorted(range(len(pool)), key=lambda i: -fused[i])]
    seeds = by_fused[:expand]
    expanded = set(lexical.seeds) if lexical is not None else set()
    missing = [i for i in seeds if i not in expanded]
    late = hand(source.neighbours, missing, vector) if missing else None
    pool = _hydrated(source, pool, by_fused[: max(p.hydrate_top, limit)])
    early = lexical.expansion if lexical is not None else None
    parts = [f.result() for f in (early, late) if f is not None]
    extra, edges = _edges_touching(set(seeds), parts)
    if vector is not None:
        extra = source.with_dense(extra, vector)
    pool = _merge([pool, extra])
    memo: dict[str, dict[str, float]] = {}
    top = [s.candidate.id for s in rank(features, pool, edges, w, memo=memo, top=2 * limit)]
    pool = _hydrated(source, pool, top)
    return rank(features, pool, edges, w, memo=memo, top=limit)


def _edges_touching(seeds: set[str], parts: Sequence[Expansion]) -> Expansion:
    """The edges with an end among ``seeds`` and the candidates at their ends."""
    edges = {(e.a, e.b): e for _, found in parts for e in found if e.a in seeds or e.b in seeds}
    ends = {end for e in edges.values() for end in (e.a, e.b)}
    extra = {c.id: c for found, _ in parts for c in found if c.id in ends}
    return list(extra.values()), list(edges.values())
