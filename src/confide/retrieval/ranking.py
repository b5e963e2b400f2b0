"""Fusion and re-ranking of retrieval candidates; pure and storage-independent.

Storage supplies candidates (dense cosine similarity and/or a BM25 score, plus a few
fields of the memory) and edges between memories (``adjacent`` turns of one conversation,
``similar`` links made at store time). :func:`rank` turns them into the final order:

1. base score: ``w_dense * dense + (1 - w_dense) * max_dense * bm25 / max_bm25``
   (BM25 rescaled to the dense scale of this query);
2. boosts: the memory's speaker is named in the query (``w_speaker``), the query asks
   "when" and the memory holds a time expression (``w_time``), shared entities
   (``w_entity``), the query asks for a name and the memory holds another one
   (``w_named``), a penalty for memories of few content words (``w_brief``), importance
   and pinning; an insight (inferred by a model, never said by the user) gives up
   ``w_insight`` of its base score;
3. propagation over edges: ``+ w_adjacent * max(score of adjacent memories)`` and
   ``+ w_related * max(strength * score of similar memories)``;
4. episodes (memories that occurred at the same time, such as the turns of one session):
   ``+ w_session * max(score of the other memories of the episode)``, so evidence spread
   over an episode lifts all of it;
5. diversity: the final order is picked greedily, each memory losing ``w_diverse`` for
   every better-ranked memory of its episode, so answers spread over several episodes
   (multi-hop questions) are not crowded out by one.

Defaults are the values most folds of ``bench/locomo.py --loo`` chose (each fold chooses on
four LoCoMo conversations and is scored on the fifth), except ``w_brief``, left off because
it would dock short facts, and ``w_dense`` (0.6, not 0.5: see docs/retrieval.md);
``--ablation`` reports each part's contribution.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from confide.config import RankingWeights
from confide.retrieval.features import (
    QueryFeatures,
    content_words,
    entities,
    has_time_expression,
    mentions,
    names,
)

__all__ = [
    "Candidate",
    "Edge",
    "EdgeKind",
    "RankingWeights",
    "ScoredCandidate",
    "base_scores",
    "rank",
]


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One memory that storage proposes for a query.

    ``dense`` is the cosine similarity to the query vector and ``bm25`` the lexical score;
    either may be ``None`` when the memory came only from the other list.
    """

    id: str
    text: str = ""
    dense: float | None = None
    bm25: float | None = None
    speaker: str | None = None
    created_at: datetime | None = None
    importance: int = 2
    pinned: bool = False
    kind: str | None = None
    """The memory's type (``insight`` ranks lower); ``None`` when not read yet."""


class EdgeKind(StrEnum):
    """``adjacent``: neighbouring turns of one conversation; ``similar``: a store-time link."""

    ADJACENT = "adjacent"
    SIMILAR = "similar"


@dataclass(frozen=True, kw_only=True)
class Edge:
    """An undirected link between two memories."""

    a: str
    b: str
    kind: EdgeKind
    strength: float = 1.0


@dataclass(frozen=True)
class ScoredCandidate:
    """A candidate with its final score and the parts that made it (for explanations)."""

    candidate: Candidate
    score: float
    parts: dict[str, float] = field(default_factory=dict)


def base_scores(candidates: Sequence[Candidate], weights: RankingWeights) -> list[float]:
    """Step 1: fuse dense and BM25 scores (a missing dense score counts as the pool's lowest)."""
    dense_known = [c.dense for c in candidates if c.dense is not None]
    max_dense = max(dense_known, default=0.0)
    min_dense = min(dense_known, default=0.0)
    max_bm25 = max((c.bm25 or 0.0 for c in candidates), default=0.0)
    w = weights.w_dense
    out: list[float] = []
    for c in candidates:
        dense = c.dense if c.dense is not None else min_dense
        lexical = (c.bm25 or 0.0) / max_bm25 if max_bm25 > 0 else 0.0
        out.append(w * dense + (1.0 - w) * max_dense * lexical)
    return out


def _neighbours(edges: Iterable[Edge]) -> dict[EdgeKind, dict[str, list[tuple[str, float]]]]:
    graph: dict[EdgeKind, dict[str, list[tuple[str, float]]]] = {
        kind: defaultdict(list) for kind in EdgeKind
    }
    for e in edges:
        graph[e.kind][e.a].append((e.b, e.strength))
        graph[e.kind][e.b].append((e.a, e.strength))
    return graph


BRIEF_WORDS = 6
"""A memory with fewer content words than this is docked ``w_brief`` in proportion: "See
you!" or "Take care!" said by the person a question names is close to it in the dense
space through the name alone, and answers nothing."""


def _boosts(
    query: QueryFeatures,
    c: Candidate,
    w: RankingWeights,
    base: float = 0.0,
    people: frozenset[str] = frozenset(),
) -> dict[str, float]:
    """Step 2 for one candidate: what its own fields add, whatever else is in the pool
    (``base``: its base score, of which an insight gives up a share; ``people``: the
    speakers of the pool, lower-cased, which are no answer to a name question)."""
    p: dict[str, float] = {}
    if w.w_insight and c.kind == "insight":
        p["insight"] = -w.w_insight * max(base, 0.0)
    if w.w_brief and c.text:
        short = BRIEF_WORDS - content_words(c.text)
        if short > 0:
            p["brief"] = -w.w_brief * short / BRIEF_WORDS
    if w.w_named and query.asks_name and c.text:
        found = names(c.text) - query.entities - people
        if found:
            p["named"] = w.w_named
    if w.w_speaker and c.speaker and mentions(query.text, c.speaker):
        p["speaker"] = w.w_speaker
    if w.w_time and query.asks_time and has_time_expression(c.text):
        p["time"] = w.w_time
    if w.w_entity and query.entities:
        shared = len(query.entities & entities(c.text))
        if shared:
            p["entity"] = w.w_entity * shared / len(query.entities)
    if w.w_importance:
        p["importance"] = w.w_importance * (c.importance - 2) / 3
    if w.w_pinned and c.pinned:
        p["pinned"] = w.w_pinned
    return p


def rank(
    query: QueryFeatures,
    candidates: Sequence[Candidate],
    edges: Iterable[Edge] = (),
    weights: RankingWeights | None = None,
    *,
    memo: dict[str, dict[str, float]] | None = None,
    top: int | None = None,
) -> list[ScoredCandidate]:
    """Order candidates best first (the best ``top`` when given). Duplicated ids keep their
    first occurrence.

    Edges to memories outside ``candidates`` are ignored: the caller expands the pool with
    the neighbours of the best seeds first (see :func:`confide.retrieval.query.retrieve`).
    ``memo`` (one dict per query, shared by repeated calls) keeps each hydrated candidate's
    boosts, which do not change between calls.
    """
    w = weights or RankingWeights()
    unique = list({c.id: c for c in reversed(candidates)}.values())[::-1]
    base = base_scores(unique, w)
    # Most of a pool is never read in full (neighbours, lower hits): without text or speaker
    # a memory's boosts depend on its importance and pinning alone, so they are shared.
    people = (
        frozenset(c.speaker.lower() for c in unique if c.speaker)
        if w.w_named and query.asks_name
        else frozenset()
    )
    plain: dict[tuple[int, bool], tuple[dict[str, float], float]] = {}
    boosts: list[dict[str, float]] = []
    own: list[float] = []
    for c, b in zip(unique, base, strict=True):
        if not c.text and not c.speaker:
            shared = plain.get((c.importance, c.pinned))
            if shared is None:
                parts = _boosts(query, c, w)
                shared = plain[(c.importance, c.pinned)] = (parts, sum(parts.values()))
            boosts.append(shared[0])
            own.append(b + shared[1])
            continue
        found = memo.get(c.id) if memo is not None and c.text else None
        if found is None or "insight" in found:  # the insight part follows this query's base
            found = _boosts(query, c, w, b, people)
            if memo is not None and c.text:
                memo[c.id] = found
        boosts.append(found)
        own.append(b + sum(found.values()))
    scores = {c.id: s for c, s in zip(unique, own, strict=True)}
    graph = _neighbours(edges)
    adjacent_of = graph[EdgeKind.ADJACENT] if w.w_adjacent else {}
    similar_of = graph[EdgeKind.SIMILAR] if w.w_related else {}
    no_spread: dict[str, float] = {}
    spread: list[dict[str, float]] = []
    totals: list[float] = []
    for c, score in zip(unique, own, strict=True):
        extra = no_spread
        if c.id in adjacent_of:
            adjacent = [scores[n] for n, _ in adjacent_of[c.id] if n in scores]
            if adjacent:
                extra = {"adjacent": w.w_adjacent * max(0.0, max(adjacent))}
        if c.id in similar_of:
            related = [s * scores[n] for n, s in similar_of[c.id] if n in scores]
            if related:
                extra = {**extra, "related": w.w_related * max(0.0, max(related))}
        spread.append(extra)
        totals.append(score + sum(extra.values()) if extra else score)
    if w.w_session:
        _lift_episodes(unique, own, totals, spread, w.w_session)
    if w.w_diverse:
        picked = _diverse_order(unique, totals, w.w_diverse, top)
    else:
        order = sorted(range(len(unique)), key=lambda i: -totals[i])
        picked = [(i, 0.0) for i in (order if top is None else order[:top])]
    return [
        ScoredCandidate(
            unique[i],
            totals[i] - penalty,
            {"base": base[i], **boosts[i], **spread[i]}
            | ({"diversity": -penalty} if penalty else {}),
        )
        for i, penalty in picked
    ]


def _episodes(candidates: Sequence[Candidate]) -> dict[datetime, list[int]]:
    """Pool positions by the time their memory occurred (one group per session of a
    conversation stored with its date); memories without a time form no group."""
    groups: dict[datetime, list[int]] = defaultdict(list)
    for i, c in enumerate(candidates):
        if c.created_at is not None:
            groups[c.created_at].append(i)
    return groups


def _lift_episodes(
    candidates: Sequence[Candidate],
    own: Sequence[float],
    totals: list[float],
    spread: list[dict[str, float]],
    weight: float,
) -> None:
    """Step 4, in place: each memory gains ``weight`` times the best own score among the
    other memories of its episode in the pool."""
    for members in _episodes(candidates).values():
        if len(members) < 2:
            continue
        ranked = sorted(members, key=lambda i: -own[i])
        first, second = ranked[0], ranked[1]
        for i in members:
            best = own[second] if i == first else own[first]
            lift = weight * max(0.0, best)
            if lift:
                totals[i] += lift
                spread[i] = {**spread[i], "session": lift}


def _diverse_order(
    candidates: Sequence[Candidate], totals: Sequence[float], weight: float, top: int | None
) -> list[tuple[int, float]]:
    """Step 5: greedy order by ``total - weight * (better-ranked memories of the episode)``.

    Penalties only grow, so a lazily updated heap picks the best current score each time
    (the picked scores never increase). Returns pool positions with their penalty.
    """
    episode: dict[int, datetime] = {
        i: c.created_at for i, c in enumerate(candidates) if c.created_at is not None
    }
    taken: dict[datetime, int] = defaultdict(int)
    heap = [(-t, i, 0) for i, t in enumerate(totals)]
    heapq.heapify(heap)
    out: list[tuple[int, float]] = []
    limit = len(candidates) if top is None else top
    while heap and len(out) < limit:
        _, i, seen = heapq.heappop(heap)
        key = episode.get(i)
        now = taken[key] if key is not None else 0
        if now != seen:
            heapq.heappush(heap, (-(totals[i] - weight * now), i, now))
            continue
        out.append((i, weight * now))
        if key is not None:
            taken[key] += 1
    return out
