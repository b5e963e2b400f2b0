"""Fusion, boosts and propagation over edges, and the retrieve() pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np
import pytest

from confide.index.tokenize import terms
from confide.retrieval.bm25 import BM25Params, bm25_idf, bm25_term_weight
from confide.retrieval.features import (
    has_time_expression,
    names,
    neutral_question,
    query_features,
    question_name_terms,
)
from confide.retrieval.query import QueryPlan, retrieve
from confide.retrieval.ranking import Candidate, Edge, EdgeKind, RankingWeights, rank
from confide.testing.embedders import HashingEmbedder

OFF = RankingWeights(
    w_dense=0.5,
    w_speaker=0,
    w_time=0,
    w_adjacent=0,
    w_importance=0,
    w_pinned=0,
    w_brief=0,
    w_named=0,
)


def _ids(ranked: Sequence[object]) -> list[str]:
    return [s.candidate.id for s in ranked]  # type: ignore[attr-defined]


def test_fusion_combines_dense_and_bm25() -> None:
    q = query_features("anything")
    pool = [
        Candidate(id="dense", dense=0.9, bm25=None),
        Candidate(id="both", dense=0.8, bm25=5.0),
        Candidate(id="lexical", dense=None, bm25=6.0),
        Candidate(id="filler", dense=0.1, bm25=None),
    ]
    assert _ids(rank(q, pool, weights=OFF))[0] == "both"
    dense_only = OFF.model_copy(update={"w_dense": 1.0})
    # a candidate missing from the dense list counts as the pool's least similar
    assert _ids(rank(q, pool, weights=dense_only)) == ["dense", "both", "lexical", "filler"]
    lexical_only = OFF.model_copy(update={"w_dense": 0.0})
    assert _ids(rank(q, pool, weights=lexical_only))[0] == "lexical"


def test_speaker_named_in_query_is_boosted() -> None:
    pool = [
        Candidate(id="a", dense=0.50, speaker="Melanie"),
        Candidate(id="b", dense=0.48, speaker="Caroline"),
    ]
    weights = OFF.model_copy(update={"w_speaker": 0.1})
    assert _ids(rank(query_features("What did Caroline paint?"), pool, weights=weights)) == [
        "b",
        "a",
    ]
    assert _ids(rank(query_features("What was painted?"), pool, weights=weights)) == ["a", "b"]


def test_time_questions_prefer_memories_with_time_expressions() -> None:
    assert has_time_expression("I went there last Friday")
    assert not has_time_expression("I like painting")
    pool = [
        Candidate(id="plain", dense=0.50, text="I like painting"),
        Candidate(id="dated", dense=0.48, text="I painted it last year"),
    ]
    weights = OFF.model_copy(update={"w_time": 0.05})
    assert _ids(rank(query_features("When did she paint?"), pool, weights=weights))[0] == "dated"
    assert _ids(rank(query_features("What did she paint?"), pool, weights=weights))[0] == "plain"


def test_adjacent_turn_of_a_strong_hit_rises() -> None:
    pool = [
        Candidate(id="question", dense=0.9),
        Candidate(id="answer", dense=0.3),
        Candidate(id="other", dense=0.4),
    ]
    edges = [Edge(a="question", b="answer", kind=EdgeKind.ADJACENT)]
    q = query_features("x")
    assert _ids(rank(q, pool, edges, weights=OFF)) == ["question", "other", "answer"]
    weights = OFF.model_copy(update={"w_adjacent": 0.5})
    ranked = rank(q, pool, edges, weights=weights)
    assert _ids(ranked)[:2] == ["question", "answer"]
    assert ranked[1].parts["adjacent"] > 0


def test_related_edges_scale_with_strength_and_duplicates_collapse() -> None:
    pool = [
        Candidate(id="hit", dense=0.9),
        Candidate(id="weak", dense=0.2),
        Candidate(id="strong", dense=0.2),
        Candidate(id="hit", dense=0.1),
    ]
    edges = [
        Edge(a="hit", b="weak", kind=EdgeKind.SIMILAR, strength=0.2),
        Edge(a="hit", b="strong", kind=EdgeKind.SIMILAR, strength=0.9),
        Edge(a="hit", b="missing", kind=EdgeKind.SIMILAR, strength=1.0),
    ]
    weights = OFF.model_copy(update={"w_related": 0.5})
    ranked = rank(query_features("x"), pool, edges, weights=weights)
    assert _ids(ranked) == ["hit", "strong", "weak"]


MAY_8 = datetime(2023, 5, 8, 13, 56)
JUNE_1 = datetime(2023, 6, 1, 10, 0)


def test_a_memory_of_a_strong_episode_rises() -> None:
    q = query_features("anything")
    pool = [
        Candidate(id="star", dense=0.80, created_at=MAY_8),
        Candidate(id="lone", dense=0.52, created_at=JUNE_1),
        Candidate(id="mate", dense=0.50, created_at=MAY_8),
        Candidate(id="undated", dense=0.51),
    ]
    assert _ids(rank(q, pool, weights=OFF)) == ["star", "lone", "undated", "mate"]
    lifted = rank(q, pool, weights=OFF.model_copy(update={"w_session": 0.1}))
    assert _ids(lifted) == ["star", "mate", "lone", "undated"]
    parts = {s.candidate.id: s.parts for s in lifted}
    # Each gains from the best *other* memory of its episode (its own score, half of the
    # dense one here: w_dense 0.5, no BM25); a memory alone in its episode gains nothing.
    assert abs(parts["mate"]["session"] - 0.1 * 0.5 * 0.80) < 1e-9
    assert abs(parts["star"]["session"] - 0.1 * 0.5 * 0.50) < 1e-9
    assert "session" not in parts["lone"] and "session" not in parts["undated"]


def test_diversity_spreads_the_answer_over_episodes() -> None:
    q = query_features("anything")
    pool = [
        Candidate(id="a1", dense=0.80, created_at=MAY_8),
        Candidate(id="a2", dense=0.79, created_at=MAY_8),
        Candidate(id="a3", dense=0.78, created_at=MAY_8),
        Candidate(id="b1", dense=0.75, created_at=JUNE_1),
    ]
    assert _ids(rank(q, pool, weights=OFF, top=2)) == ["a1", "a2"]
    diverse = rank(q, pool, weights=OFF.model_copy(update={"w_diverse": 0.03}))
    assert _ids(diverse) == ["a1", "b1", "a2", "a3"]
    scores = [s.score for s in diverse]
    assert scores == sorted(scores, reverse=True)
    assert abs(diverse[3].parts["diversity"] + 0.06) < 1e-9


def test_brief_chit_chat_is_docked() -> None:
    q = query_features("What console does Nate own?")
    pool = [
        Candidate(id="bye", dense=0.60, text="Take care!", speaker="Nate"),
        Candidate(
            id="answer",
            dense=0.55,
            text="I bought a new Nintendo Switch console and play Zelda on it daily.",
            speaker="Nate",
        ),
    ]
    assert _ids(rank(q, pool, weights=OFF)) == ["bye", "answer"]
    docked = rank(q, pool, weights=OFF.model_copy(update={"w_brief": 0.1}))
    assert _ids(docked) == ["answer", "bye"]
    assert "brief" not in docked[0].parts


def test_name_questions_prefer_memories_holding_another_name() -> None:
    assert names("Hey Tim! I went to Chicago with Maria. Thanks, John!") == frozenset(
        {"tim", "chicago", "maria", "john"}
    )
    assert names("Wow. Sounds great! Check this out.") == frozenset()
    pool = [
        Candidate(
            id="vague",
            dense=0.50,
            text="Thanks, Maria! I love exploring new places.",
            speaker="John",
        ),
        Candidate(id="city", dense=0.48, text="I was in Chicago, it was awesome!", speaker="John"),
        Candidate(id="other", dense=0.47, text="Hi John, how was the trip?", speaker="Maria"),
    ]
    weights = OFF.model_copy(update={"w_named": 0.05})
    # The speakers of the pool (John, Maria) are no answer to "which cities".
    ranked = rank(query_features("Which cities has John been to?"), pool, weights=weights)
    assert _ids(ranked) == ["city", "vague", "other"]
    assert _ids(rank(query_features("How is John?"), pool, weights=weights))[0] == "vague"


def test_pinned_and_important_memories_break_ties() -> None:
    pool = [
        Candidate(id="plain", dense=0.5),
        Candidate(id="pinned", dense=0.5, pinned=True),
        Candidate(id="important", dense=0.5, importance=5),
    ]
    ranked = rank(query_features("x"), pool)
    assert _ids(ranked)[-1] == "plain"


class ListSource:
    """A tiny CandidateSource over a list of conversation turns."""

    def __init__(self, turns: list[tuple[str, str]], embedder: HashingEmbedder) -> None:
        self.turns = turns
        self.vectors = embedder.embed([f"{s}: {t}" for s, t in turns])
        self.terms = [terms(f"{s}: {t}") for s, t in turns]

    def _cand(self, i: int, *, dense: float | None = None, bm25: float | None = None) -> Candidate:
        speaker, text = self.turns[i]
        return Candidate(id=str(i), text=text, speaker=speaker, dense=dense, bm25=bm25)

    def dense_candidates(self, vector: np.ndarray, *, limit: int) -> list[Candidate]:
        sims = self.vectors @ vector
        return [self._cand(int(i), dense=float(sims[i])) for i in np.argsort(-sims)[:limit]]

    def lexical_candidates(
        self, query_terms: Sequence[str], *, limit: int, params: BM25Params
    ) -> list[Candidate]:
        n = len(self.terms)
        avg = sum(map(len, self.terms)) / n
        out = []
        for i, doc in enumerate(self.terms):
            s = sum(
                bm25_term_weight(
                    doc.count(t),
                    len(doc),
                    avg,
                    bm25_idf(sum(t in d for d in self.terms), n),
                    params,
                )
                for t in set(query_terms)
            )
            if s > 0:
                out.append(self._cand(i, bm25=s))
        return sorted(out, key=lambda c: -(c.bm25 or 0))[:limit]

    def common_terms(self, query_terms: Sequence[str], *, share: float, at_least: int) -> set[str]:
        need = max(at_least, share * len(self.terms))
        return {t for t in query_terms if sum(t in d for d in self.terms) >= need}

    def hydrate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        return list(candidates)  # these candidates carry their text from the start

    def neighbours(
        self, ids: Sequence[str], vector: np.ndarray | None
    ) -> tuple[list[Candidate], list[Edge]]:
        edges = []
        for i in map(int, ids):
            for j in (i - 1, i + 1):
                if 0 <= j < len(self.turns):
                    edges.append(Edge(a=str(i), b=str(j), kind=EdgeKind.ADJACENT))
        others = {int(e.b) for e in edges}
        return [
            self._cand(j, dense=None if vector is None else float(self.vectors[j] @ vector))
            for j in others
        ], edges

    def with_dense(self, candidates: Sequence[Candidate], vector: np.ndarray) -> list[Candidate]:
        return [
            c if c.dense is not None else replace(c, dense=float(self.vectors[int(c.id)] @ vector))
            for c in candidates
        ]


def test_retrieve_expands_to_the_answer_next_to_the_question() -> None:
    embedder = HashingEmbedder()
    turns = [("Ann", f"filler remark number {i} about the weather") for i in range(30)]
    turns[10] = ("Bob", "What breed is your new puppy?")
    turns[11] = ("Ann", "A beagle, we named him Max.")
    source = ListSource(turns, embedder)
    # Speaker and brevity boosts off: thirty identical fillers by the named speaker would
    # otherwise stand for a real conversation, which they are not.
    weights = RankingWeights(w_dense=0.5, w_speaker=0.1, w_brief=0, w_named=0)
    ranked = retrieve(
        source, "What breed is Ann's puppy?", embedder=embedder, limit=3, weights=weights
    )
    # the answer shares no word with the question; only its neighbour to the hit lifts it
    assert {s.candidate.id for s in ranked} == {"9", "10", "11"}
    no_edges = weights.model_copy(update={"w_adjacent": 0})
    plain = retrieve(
        source, "What breed is Ann's puppy?", embedder=embedder, limit=3, weights=no_edges
    )
    assert "11" not in [s.candidate.id for s in plain]


def _puppy_among_fillers() -> tuple[HashingEmbedder, ListSource]:
    """Sixty filler turns, two of them a question about a puppy and its answer."""
    embedder = HashingEmbedder()
    turns = [("Ann", f"filler remark number {i} about the weather") for i in range(60)]
    turns[10] = ("Bob", "What breed is your new puppy?")
    turns[11] = ("Ann", "A beagle, we named him Max.")
    return embedder, ListSource(turns, embedder)


@pytest.mark.parametrize("early", [0, 1, 5, 40])
def test_more_or_fewer_edges_read_early_give_the_same_answer(early: int) -> None:
    embedder, source = _puppy_among_fillers()
    asked: list[tuple[list[str], bool]] = []
    real = source.neighbours

    def neighbours(
        ids: Sequence[str], vector: np.ndarray | None
    ) -> tuple[list[Candidate], list[Edge]]:
        asked.append((list(ids), vector is None))
        return real(ids, vector)

    source.neighbours = neighbours  # type: ignore[method-assign]
    weights = RankingWeights(w_dense=0.5, w_speaker=0.1, w_brief=0, w_named=0)
    question = "What breed is Ann's puppy?"
    configured = retrieve(source, question, embedder=embedder, limit=3, weights=weights)
    (seeds,) = [len(ids) for ids, no_vector in asked if no_vector]
    asked.clear()
    plan = QueryPlan(early_expand_top=early)
    other = retrieve(source, question, embedder=embedder, limit=3, weights=weights, plan=plan)
    assert [(s.candidate.id, s.score) for s in other] == [
        (s.candidate.id, s.score) for s in configured
    ]
    read_early = [len(ids) for ids, no_vector in asked if no_vector]
    if early < seeds:
        assert read_early == ([early] if early else [])
    else:  # as many of the lexical hits as there are, up to ``early``
        assert read_early[0] > seeds


@pytest.mark.parametrize("read", [0, 1, 5])
def test_fewer_lexical_hits_read_on_the_worker_give_the_same_answer(read: int) -> None:
    embedder, source = _puppy_among_fillers()
    hydrated: list[list[str]] = []
    real = source.hydrate

    def hydrate(candidates: Sequence[Candidate]) -> list[Candidate]:
        hydrated.append([c.id for c in candidates])
        return real(candidates)

    source.hydrate = hydrate  # type: ignore[method-assign]
    weights = RankingWeights(w_dense=0.5, w_speaker=0.1, w_brief=0, w_named=0)
    question = "What breed is Ann's puppy about the weather?"
    configured = retrieve(source, question, embedder=embedder, limit=3, weights=weights)
    first = hydrated[0]
    hydrated.clear()
    plan = QueryPlan(lexical_hydrate_top=read)
    other = retrieve(source, question, embedder=embedder, limit=3, weights=weights, plan=plan)
    assert [(s.candidate.id, s.score) for s in other] == [
        (s.candidate.id, s.score) for s in configured
    ]
    # The lexical side read its best ``read`` hits where it read more as configured; the
    # caller read the rest it needed.
    assert len(first) > 5
    assert hydrated[0] == first[:read]


def test_retrieve_without_embedder_uses_bm25_only() -> None:
    source = ListSource([("Ann", "I adore hiking"), ("Bob", "Chess is fun")], HashingEmbedder())
    ranked = retrieve(source, "chess", embedder=None, limit=1)
    assert ranked[0].candidate.id == "1"


def test_an_insight_gives_up_part_of_its_score_to_what_the_user_said() -> None:
    q = query_features("how does she feel about mornings")
    pool = [
        Candidate(id="insight", text="The user values quiet mornings.", dense=0.8, kind="insight"),
        Candidate(id="said", text="The user walks every morning.", dense=0.7, kind="fact"),
    ]
    ranked = rank(q, pool, weights=OFF)
    assert _ids(ranked) == ["said", "insight"]
    insight = next(s for s in ranked if s.candidate.id == "insight")
    assert insight.parts["insight"] == -0.3 * insight.parts["base"]
    no_penalty = OFF.model_copy(update={"w_insight": 0.0})
    assert _ids(rank(q, pool, weights=no_penalty)) == ["insight", "said"]


def test_question_names_are_its_capitalised_words_but_openers() -> None:
    question = "Did Caroline's son and Mel visit the LGBTQ center in Paris?"
    assert question_name_terms(question) == {"caroline", "mel", "lgbtq", *terms("Paris")}


def test_question_names_take_any_script_and_apostrophe_but_not_a_sentence_opener() -> None:
    question = "Kayaking: did Zoë’s friend O'Brien meet Ana-María? Caroline, when?"
    # "Kayaking" and "Caroline" open a sentence; "Ana-María" is two search terms.
    assert question_name_terms(question) == {*terms("Zoë"), *terms("O'Brien")}
    assert (
        neutral_question(question, {*terms("Zoë")})
        == "Kayaking: did they friend O'Brien meet Ana-María? Caroline, when?"
    )


def test_neutral_question_replaces_only_the_common_names() -> None:
    question = "What did Caroline's kids paint in Paris, Caroline?"
    assert neutral_question(question, {"caroline"}) == "What did they kids paint in Paris, they?"
    assert neutral_question(question, set()) == question
    assert neutral_question("When did Ann go?", {"bob"}) == "When did Ann go?"
