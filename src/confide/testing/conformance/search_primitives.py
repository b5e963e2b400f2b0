"""Conformance: the storage search primitives (vectors, BM25 over blind tokens, edges)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.retrieval.query import embedded_question
from confide.retrieval.ranking import Candidate, RankingWeights
from confide.retrieval.source import StorageCandidateSource
from confide.storage.base import EdgeRow, Storage
from confide.storage.sql import LexicalTuning
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness, other_process
from confide.testing.embedders import RandomEmbedder, unit_vector
from confide.types import Memory, MemoryFilter, MemoryState

DIMS = 16


def _unit(rng: np.random.Generator) -> np.ndarray:
    return unit_vector(rng, DIMS)


def _with_vectors(
    engine: MemoryEngine, storage: Storage, memories: list[Memory], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    vectors = {m.id: _unit(rng) for m in memories}
    with storage.transaction() as tx:
        for m in memories:
            tx.put_vector(m.id, m.account_id, m.user_id, "fake", vectors[m.id])
    return vectors


def _crowd(
    engine: MemoryEngine, user_id: str, n: int, *, every: int, few: str, many: str
) -> list[Memory]:
    """``n`` memories of ``user_id``: every ``every``-th in category ``few``, the rest ``many``."""
    return engine.store_many(
        [
            {
                "account_id": ACCOUNT,
                "user_id": user_id,
                "key": f"k{i}",
                "value": f"memory {i}",
                "category": few if i % every == 0 else many,
            }
            for i in range(n)
        ]
    )


def _exact_top(vectors: dict[str, np.ndarray], ids: set[str], q: np.ndarray, k: int) -> list[str]:
    ranked = sorted(ids, key=lambda i: -float(vectors[i] @ q))
    return ranked[:k]


class SearchPrimitivesConformance(StorageHarness):
    """The storage search primitives: vectors, BM25 over blind tokens, edges."""

    @pytest.fixture
    def bound(self, engine: MemoryEngine, storage: Storage) -> Storage:
        """The store with an embedder bound, and ``engine`` writing vectors (but no edges) to it."""
        indexer = VectorIndexer(
            storage, RandomEmbedder("fake", DIMS), link_top_k=0, link_adjacent=False
        )
        engine.add_indexer(indexer)
        return storage

    def test_vector_search_returns_full_top_k_under_selective_filter(
        self, engine: MemoryEngine, bound: Storage
    ) -> None:
        rng = np.random.default_rng(1)
        crowd = _crowd(engine, "busy", 1200, every=100, few="rare", many="common")
        lonely = engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": f"u{i}", "key": "k", "value": "v"}
                for i in range(30)
            ]
        )
        vectors = _with_vectors(engine, bound, crowd + lonely, rng)
        q = _unit(rng)
        rare = {m.id for m in crowd if m.category == "rare"}
        flt = MemoryFilter(account_id=ACCOUNT, user_id="busy", categories=("rare",))
        hits = bound.vector_search(flt, q, 10)
        assert [h.memory_id for h in hits] == _exact_top(vectors, rare, q, 10)
        one = MemoryFilter(account_id=ACCOUNT, user_id="u7")
        assert [h.memory_id for h in bound.vector_search(one, q, 5)] == [lonely[7].id]
        everything = MemoryFilter(account_id=ACCOUNT, user_id="busy")
        top = [h.memory_id for h in bound.vector_search(everything, q, 20)]
        assert len(top) == 20
        exact = _exact_top(vectors, {m.id for m in crowd}, q, 20)
        assert len(set(top) & set(exact)) >= 18  # approximate index, near-exact at the top
        scores = [h.score for h in bound.vector_search(everything, q, 20)]
        assert scores == sorted(scores, reverse=True)

    def test_vector_search_reads_on_when_the_first_candidates_mostly_fail_the_filter(
        self, engine: MemoryEngine, bound: Storage
    ) -> None:
        rng = np.random.default_rng(6)
        stored = _crowd(engine, "mixed", 600, every=8, few="some", many="other")
        vectors = _with_vectors(engine, bound, stored, rng)
        q = _unit(rng)
        some = {m.id for m in stored if m.category == "some"}
        flt = MemoryFilter(account_id=ACCOUNT, user_id="mixed", categories=("some",))
        # One in eight passes: forty hits lie a few hundred candidates down the ranking.
        hits = bound.vector_search(flt, q, 40)
        assert len(hits) == 40
        assert {h.memory_id for h in hits} <= some
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert len({h.memory_id for h in hits} & set(_exact_top(vectors, some, q, 40))) >= 38

    def test_vector_search_excludes_forgotten_and_other_users(
        self, engine: MemoryEngine, bound: Storage
    ) -> None:
        rng = np.random.default_rng(2)
        mine = [
            engine.store({"account_id": ACCOUNT, "user_id": "me", "key": f"k{i}", "value": "v"})
            for i in range(5)
        ]
        theirs = engine.store({"account_id": ACCOUNT, "user_id": "them", "key": "k", "value": "v"})
        shared = engine.store(
            {
                "account_id": ACCOUNT,
                "user_id": "them",
                "key": "s",
                "value": "v",
                "visibility": "shared",
            }
        )
        vectors = _with_vectors(engine, bound, [*mine, theirs, shared], rng)
        engine.forget(mine[0].id, account_id=ACCOUNT)
        q = vectors[mine[0].id]
        flt = MemoryFilter(account_id=ACCOUNT, user_id="me")
        ids = [h.memory_id for h in bound.vector_search(flt, q, 10)]
        assert set(ids) == {m.id for m in mine[1:]}
        with_shared = flt.model_copy(update={"include_shared": True})
        ids = [h.memory_id for h in bound.vector_search(with_shared, q, 10)]
        assert set(ids) == {m.id for m in mine[1:]} | {shared.id}
        gone = MemoryFilter(account_id=ACCOUNT, user_id="me", states=(MemoryState.SOFT_DELETED,))
        assert [h.memory_id for h in bound.vector_search(gone, q, 3)] == [mine[0].id]

    def test_vector_search_sees_writes_and_erasure(
        self, engine: MemoryEngine, bound: Storage
    ) -> None:
        rng = np.random.default_rng(3)
        first = add(engine, key="a")
        vectors = _with_vectors(engine, bound, [first], rng)
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        assert [h.memory_id for h in bound.vector_search(flt, vectors[first.id], 3)] == [first.id]
        second = add(engine, key="b")
        more = _with_vectors(engine, bound, [second], rng)
        assert bound.vector_search(flt, more[second.id], 1)[0].memory_id == second.id
        engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert bound.vector_search(flt, more[second.id], 3) == []
        assert bound.count_rows("embeddings", ACCOUNT, "user-1") == 0

    def test_lexical_search_ranks_by_bm25_without_plaintext(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        texts = {
            "cat": "my cat Tom likes fish and naps",
            "dog": "the dog barks at the postman every morning",
            "fish": "fish and chips on friday fish fish",
            "piano": "she plays the piano on sunday",
        }
        stored = {k: add(engine, key=k, value=v) for k, v in texts.items()}
        add(engine, key="other", value="fish everywhere", user_id="user-2")
        tokens = list(engine.lexical.hashed_terms(ACCOUNT, "fish"))
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        hits = storage.lexical_search(flt, tokens, 10, k1=1.2, b=0.75)
        assert [h.memory_id for h in hits] == [stored["fish"].id, stored["cat"].id]
        assert hits[0].score > hits[1].score > 0
        engine.forget(stored["fish"].id, account_id=ACCOUNT)
        hits = storage.lexical_search(flt, tokens, 10, k1=1.2, b=0.75)
        assert [h.memory_id for h in hits] == [stored["cat"].id]
        piano = list(engine.lexical.hashed_terms(ACCOUNT, "piano sunday"))
        narrowed = flt.model_copy(update={"keys": ("dog",)})
        assert storage.lexical_search(narrowed, piano, 5, k1=1.2, b=0.75) == []

    def test_a_memory_of_more_words_than_one_insert_carries_is_found_by_each(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        # 1,200 distinct words: more blind tokens than a backend writes in one statement.
        words = [
            "q" + "".join("abcdefghijklmnopqrstuvwxyz"[(i // 26**p) % 26] for p in range(3))
            for i in range(1200)
        ]
        long = add(engine, key="long", value=" ".join(words))
        add(engine, key="short", value=f"{words[0]} and nothing else")
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        for word in (words[0], words[599], words[-1]):
            tokens = list(engine.lexical.hashed_terms(ACCOUNT, word))
            hits = [h.memory_id for h in storage.lexical_search(flt, tokens, 5, k1=1.2, b=0.75)]
            assert long.id in hits
        assert storage.count_rows("memory_tokens", ACCOUNT, "user-1") >= 1200

    def test_edges_are_unique_and_found_from_either_end(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        a, b, c = (add(engine, key=k) for k in "abc")
        with storage.transaction() as tx:
            tx.put_edges(ACCOUNT, "user-1", [EdgeRow(a.id, b.id, "related_to", 0.8)])
            tx.put_edges(
                ACCOUNT,
                "user-1",
                [EdgeRow(a.id, b.id, "related_to", 0.1), EdgeRow(b.id, c.id, "adjacent", 1.0)],
            )
        edges = storage.edges(ACCOUNT, [b.id])
        assert {(e.from_id, e.to_id, e.strength) for e in edges} == {
            (a.id, b.id, 0.8),
            (b.id, c.id, 1.0),
        }
        assert {(e.from_id, e.to_id) for e in storage.edges(ACCOUNT, [c.id])} == {(b.id, c.id)}

    def test_lexical_search_sees_memories_added_after_an_empty_search(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        tokens = list(engine.lexical.hashed_terms(ACCOUNT, "gardening"))
        assert storage.lexical_search(flt, tokens, 5, k1=1.2, b=0.75) == []
        memory = add(engine, key="hobby", value="She loves gardening")
        hits = storage.lexical_search(flt, tokens, 5, k1=1.2, b=0.75)
        assert [h.memory_id for h in hits] == [memory.id]

    def test_lexical_search_follows_another_process_writes(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store_url: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """A store that searched a term before (whatever it kept from that search) answers
        from what another process wrote since: new memories, re-written terms, deleted
        memories and an erasure."""
        stored = engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": "user-1", "key": f"k{i}", "value": f"fish {i}"}
                for i in range(6)
            ]
        )
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")

        def found(text: str) -> set[str]:
            tokens = list(engine.lexical.hashed_terms(ACCOUNT, text))
            return {h.memory_id for h in storage.lexical_search(flt, tokens, 20, k1=1.2, b=0.75)}

        assert found("fish") == {m.id for m in stored}
        assert found("bicycle") == set()
        other = other_process(storage_url, key_store_url, engine.settings, request)
        kayak = add(other, key="boat", value="fish from the kayak")
        assert found("fish") == {m.id for m in stored} | {kayak.id}
        rewritten = stored[0]
        with other.storage.transaction() as tx:
            tx.put_tokens(
                rewritten.id, ACCOUNT, "user-1", engine.lexical.hashed_terms(ACCOUNT, "bicycle")
            )
        assert found("bicycle") == {rewritten.id}
        assert rewritten.id not in found("fish")
        with other.storage.transaction() as tx:
            tx.delete_memories([stored[1].id])
        assert found("fish") == {m.id for m in stored[2:]} | {kayak.id}
        other.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert found("fish") == found("bicycle") == set()

    def test_search_hits_carry_the_rows_they_matched(
        self, engine: MemoryEngine, bound: Storage
    ) -> None:
        rng = np.random.default_rng(4)
        stored = [add(engine, key=f"k{i}", value=f"walked the dog {i}") for i in range(6)]
        vectors = _with_vectors(engine, bound, stored, rng)
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        dense = bound.vector_search(flt, vectors[stored[0].id], 3)
        tokens = list(engine.lexical.hashed_terms(ACCOUNT, "dog"))
        lexical = bound.lexical_search(flt, tokens, 3, k1=1.2, b=0.75)
        for hit in [*dense, *lexical]:
            # A row, when given, is the memory the hit names, as stored (value still sealed).
            assert hit.row is None or hit.row.id == hit.memory_id
            if hit.row is not None:
                assert engine.open_row(hit.row).value.startswith("walked the dog")
        # Rows are optional (SQLite's vector index checks the filter on ids alone); the lexical
        # search reads them on both backends.
        assert [h.memory_id for h in dense][:1] == [stored[0].id]
        assert any(h.row is not None for h in lexical)

    def test_neighbourhood_keeps_to_the_filter(self, engine: MemoryEngine, bound: Storage) -> None:
        rng = np.random.default_rng(5)
        seed, near, gone = (add(engine, key=k) for k in ("seed", "near", "gone"))
        private = add(engine, key="private", user_id="user-2")
        shared = engine.store(
            {
                "account_id": ACCOUNT,
                "user_id": "user-2",
                "key": "shared",
                "value": "v",
                "visibility": "shared",
            }
        )
        vectors = _with_vectors(engine, bound, [seed, near, gone, private, shared], rng)
        with bound.transaction() as tx:
            tx.put_edges(
                ACCOUNT,
                "user-1",
                [
                    EdgeRow(seed.id, near.id, "adjacent", 1.0),
                    EdgeRow(gone.id, seed.id, "related_to", 0.7),
                    EdgeRow(seed.id, private.id, "related_to", 0.9),
                    EdgeRow(shared.id, seed.id, "related_to", 0.6),
                ],
            )
        engine.forget(gone.id, account_id=ACCOUNT)
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        hood = bound.neighbourhood(flt, [seed.id], vectors[seed.id])
        assert {(e.from_id, e.to_id) for e in hood.edges} == {(seed.id, near.id)}
        assert [r.id for r in hood.rows] == [near.id]
        assert hood.similarity[near.id] == pytest.approx(float(vectors[near.id] @ vectors[seed.id]))
        with_shared = flt.model_copy(update={"include_shared": True})
        hood = bound.neighbourhood(with_shared, [seed.id], None)
        assert {r.id for r in hood.rows} == {near.id, shared.id}
        assert hood.similarity == {}
        assert hood.vectors == {}
        # Read before the query is embedded: the neighbours' own vectors come back instead.
        hood = bound.neighbourhood(flt, [seed.id], None, with_vectors=True)
        assert hood.similarity == {}
        assert list(hood.vectors) == [near.id]
        assert hood.vectors[near.id] == pytest.approx(vectors[near.id], abs=1e-6)
        # An edge between two of the given memories makes each the other's neighbour.
        both = bound.neighbourhood(flt, [seed.id, near.id], vectors[seed.id])
        assert {r.id for r in both.rows} == {seed.id, near.id}
        assert both.similarity[seed.id] == pytest.approx(1.0, abs=1e-6)
        assert bound.neighbourhood(flt, [], None).edges == []

    def test_neighbours_read_before_the_query_vector_are_scored_after(
        self, engine: MemoryEngine, bound: Storage
    ) -> None:
        rng = np.random.default_rng(6)
        seed, near, far = (add(engine, key=k) for k in ("seed", "near", "far"))
        vectors = _with_vectors(engine, bound, [seed, near, far], rng)
        with bound.transaction() as tx:
            tx.put_edges(ACCOUNT, "user-1", [EdgeRow(seed.id, near.id, "adjacent", 1.0)])
        source = StorageCandidateSource(engine, MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        early, edges = source.neighbours([seed.id], None)
        assert [(c.id, c.dense) for c in early] == [(near.id, None)]
        assert [(e.a, e.b) for e in edges] == [(seed.id, near.id)]
        query = vectors[far.id]
        scored = source.with_dense(
            [*early, Candidate(id=far.id), Candidate(id=seed.id, dense=0.5)], query
        )
        assert scored[0].dense == pytest.approx(float(vectors[near.id] @ query), abs=1e-6)
        assert scored[1].dense == pytest.approx(1.0, abs=1e-6)  # not read before: asked for now
        assert scored[2].dense == 0.5  # already scored: kept

    def test_neighbours_skip_stored_vectors_when_no_query_vector_will_come(
        self, engine: MemoryEngine, bound: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        seed, near = (add(engine, key=k) for k in ("seed", "near"))
        _with_vectors(engine, bound, [seed, near], np.random.default_rng(7))
        with bound.transaction() as tx:
            tx.put_edges(ACCOUNT, "user-1", [EdgeRow(seed.id, near.id, "adjacent", 1.0)])
        asked: list[bool] = []
        read = bound.neighbourhood

        def spy(*args: Any, with_vectors: bool = False) -> Any:
            asked.append(with_vectors)
            return read(*args, with_vectors=with_vectors)

        monkeypatch.setattr(bound, "neighbourhood", spy)
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        for expected in (True, False):
            source = StorageCandidateSource(engine, flt, vector_expected=expected)
            found, edges = source.neighbours([seed.id], None)
            assert [c.id for c in found] == [near.id] and len(edges) == 1
        assert asked == [True, False]

    def test_lexical_search_under_a_selective_filter_returns_every_match(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        crowd = [
            {"account_id": ACCOUNT, "user_id": "user-1", "key": f"k{i}", "value": f"fish {i}"}
            for i in range(120)
        ]
        for i in (7, 77):
            crowd[i]["category"] = "rare"
        stored = engine.store_many(crowd)
        tokens = list(engine.lexical.hashed_terms(ACCOUNT, "fish"))
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1", categories=("rare",))
        hits = storage.lexical_search(flt, tokens, 3, k1=1.2, b=0.75)
        assert {h.memory_id for h in hits} == {stored[7].id, stored[77].id}

    def test_cached_term_counts_never_hide_new_memories(
        self, engine: MemoryEngine, storage: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Term counts of large owners are cached; make this owner "large" to exercise the cache.
        small = LexicalTuning(stats_min_cached=5, document_frequency_min_cached=5)
        monkeypatch.setattr(storage, "lexical", small)
        engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": "user-1", "key": f"k{i}", "value": f"fish {i}"}
                for i in range(10)
            ]
        )
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        fish = list(engine.lexical.hashed_terms(ACCOUNT, "fish"))
        kayak = list(engine.lexical.hashed_terms(ACCOUNT, "kayak"))
        assert len(storage.lexical_search(flt, fish, 20, k1=1.2, b=0.75)) == 10
        assert storage.lexical_search(flt, kayak, 5, k1=1.2, b=0.75) == []
        new = add(engine, key="boat", value="fish from the kayak")
        assert new.id in {
            h.memory_id for h in storage.lexical_search(flt, fish, 20, k1=1.2, b=0.75)
        }
        assert [h.memory_id for h in storage.lexical_search(flt, kayak, 5, k1=1.2, b=0.75)] == [
            new.id
        ]

    def test_common_terms_give_way_to_rare_ones_and_count_in_full_alone(
        self, engine: MemoryEngine, storage: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        crowd = [
            {
                "account_id": ACCOUNT,
                "user_id": "user-1",
                "key": f"k{i}",
                "value": f"fish number {i}",
            }
            for i in range(30)
        ]
        crowd += [
            {"account_id": ACCOUNT, "user_id": "user-1", "key": f"b{i}", "value": f"kayak fish {i}"}
            for i in range(3)
        ]
        stored = engine.store_many(crowd)
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        fish = list(engine.lexical.hashed_terms(ACCOUNT, "fish"))
        both = list(engine.lexical.hashed_terms(ACCOUNT, "fish kayak"))
        exact_fish = storage.lexical_search(flt, fish, 40, k1=1.2, b=0.75)
        # Now "fish" (33 memories) is common and "kayak" (3) is not; counts are cached.
        small = LexicalTuning(common_min=10, stats_min_cached=5, document_frequency_min_cached=5)
        monkeypatch.setattr(storage, "lexical", small)
        hits = storage.lexical_search(flt, both, 40, k1=1.2, b=0.75)
        assert {h.memory_id for h in hits} == {m.id for m in stored[30:]}
        # A query of common terms only is scored with their full counts, as without the cut
        # (the capped count of "fish" kept from the query above is only a lower bound).
        alone = storage.lexical_search(flt, fish, 40, k1=1.2, b=0.75)
        assert [(h.memory_id, round(h.score, 9)) for h in alone] == [
            (h.memory_id, round(h.score, 9)) for h in exact_fish
        ]
        assert len(alone) == 33

    def test_a_term_over_the_postings_budget_is_scored_on_a_fixed_sample(
        self, engine: MemoryEngine, storage: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        values = [f"fish {' '.join(['blue'] * (i % 5))} number {i}" for i in range(30)]
        values += [f"kayak fish {i}" for i in range(3)]
        stored = engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": "user-1", "key": f"k{i}", "value": v}
                for i, v in enumerate(values)
            ]
        )
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        fish = list(engine.lexical.hashed_terms(ACCOUNT, "fish"))
        both = list(engine.lexical.hashed_terms(ACCOUNT, "fish kayak"))
        whole = LexicalTuning(postings_budget=10, sample_over_budget=False)
        monkeypatch.setattr(storage, "lexical", whole)
        every = {
            h.memory_id: h.score for h in storage.lexical_search(flt, fish, 40, k1=1.2, b=0.75)
        }
        assert len(every) == 33
        monkeypatch.setattr(storage, "lexical", LexicalTuning(postings_budget=10))
        # "fish" alone (33 postings) is over the budget: the 10 smallest ids are scored, as
        # they were with every posting (the same weight: the term's full count).
        sampled = storage.lexical_search(flt, fish, 40, k1=1.2, b=0.75)
        assert [h.memory_id for h in sampled] == sorted(
            sorted(every)[:10], key=lambda i: (-round(every[i], 9), i)
        )
        assert all(abs(h.score - every[h.memory_id]) < 1e-9 for h in sampled)
        assert storage.lexical_search(flt, fish, 40, k1=1.2, b=0.75) == sampled
        # "kayak" (3) is within the budget, so "fish" gives way and nothing is sampled.
        kayak = {m.id for m in stored[30:]}
        assert {h.memory_id for h in storage.lexical_search(flt, both, 40, k1=1.2, b=0.75)} == kayak

    def test_a_one_term_search_scores_each_memory_as_a_search_of_more_terms_does(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        # One term is scored posting by posting (nothing to add up); a second term that only
        # one memory holds must leave every other memory's score as it was.
        values = [f"fish {' '.join(['blue'] * (i % 4))} number {i}" for i in range(12)]
        values.append("fish and a kayak")
        stored = engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": "user-1", "key": f"k{i}", "value": v}
                for i, v in enumerate(values)
            ]
        )
        shared = add(
            engine, key="s", value="fish fish for all", user_id="user-2", visibility="shared"
        )
        kayak = stored[-1].id
        fish = list(engine.lexical.hashed_terms(ACCOUNT, "fish"))
        both = list(engine.lexical.hashed_terms(ACCOUNT, "fish kayak"))
        for flt in (
            MemoryFilter(account_id=ACCOUNT, user_id="user-1"),
            MemoryFilter(account_id=ACCOUNT, user_id="user-1", include_shared=True),
            MemoryFilter(account_id=ACCOUNT),
        ):
            one = storage.lexical_search(flt, fish, 40, k1=1.2, b=0.75)
            two = {
                h.memory_id: h.score for h in storage.lexical_search(flt, both, 40, k1=1.2, b=0.75)
            }
            # The other user's shared memory is in reach account-wide or with the shared half.
            reaches_shared = flt.user_id is None or flt.include_shared
            expected = {m.id for m in stored} | ({shared.id} if reaches_shared else set())
            assert {h.memory_id for h in one} == expected
            assert len({h.memory_id for h in one}) == len(one)
            assert two[kayak] > next(h.score for h in one if h.memory_id == kayak)
            assert all(
                abs(h.score - two[h.memory_id]) < 1e-9
                for h in one
                if h.memory_id not in (kayak, shared.id)
            )
            assert [h.score for h in one] == sorted((h.score for h in one), reverse=True)

    def test_common_tokens_count_the_owner_against_a_share_and_a_floor(
        self, engine: MemoryEngine, storage: Storage, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def rows(user: str, values: list[str]) -> list[dict[str, Any]]:
            return [
                {"account_id": ACCOUNT, "user_id": user, "key": f"k{i}", "value": v}
                for i, v in enumerate(values)
            ]

        own = [f"Caroline said hello {i}" for i in range(30)]
        own += [f"Caroline went fishing {i}" for i in range(7)]
        own += [f"Caroline flew to Paris {i}" for i in range(3)]
        engine.store_many(rows("user-1", own) + rows("user-2", [f"Paris {i}" for i in range(80)]))
        one = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        source = StorageCandidateSource(engine, one)
        asked = ["caroline", "fish", "paris", "kayak"]
        # 40 memories: Caroline in all, fishing in 7 (under a fifth), Paris in 3 (user-2's
        # 80 are another owner's); none of it depends on cached counts.
        assert source.common_terms(asked, share=0.2, at_least=5) == {"caroline"}
        assert source.common_terms(asked, share=0.15, at_least=5) == {"caroline", "fish"}
        assert source.common_terms(asked, share=0.2, at_least=41) == set()
        small = LexicalTuning(stats_min_cached=5, document_frequency_min_cached=5)
        monkeypatch.setattr(storage, "lexical", small)
        for _ in range(2):  # counted, then from the cache
            assert source.common_terms(asked, share=0.15, at_least=5) == {"caroline", "fish"}
        expired = LexicalTuning(stats_min_cached=5, document_frequency_min_cached=5, stats_ttl=0)
        monkeypatch.setattr(storage, "lexical", expired)
        for _ in range(2):  # a large owner's counts read again, once they are too old
            assert source.common_terms(asked, share=0.15, at_least=5) == {"caroline", "fish"}
        account = StorageCandidateSource(engine, MemoryFilter(account_id=ACCOUNT))
        assert account.common_terms(asked, share=0.5, at_least=5) == {"paris"}

    def test_question_is_embedded_without_the_owners_common_names(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        engine.store_many(
            [
                {"account_id": ACCOUNT, "user_id": "user-1", "key": f"k{i}", "value": v}
                for i, v in enumerate(
                    [f"Caroline: hello Melanie {i}" for i in range(25)] + ["Caroline: Paris"]
                )
            ]
        )
        source = StorageCandidateSource(engine, MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        question = "What did Caroline's kids paint in Paris, Melanie?"
        assert (
            embedded_question(source, question, RankingWeights())
            == "What did they kids paint in Paris, they?"
        )
        assert embedded_question(source, question, RankingWeights(common_name_share=0)) == question
        # Nothing but common names: the question is embedded as asked.
        assert embedded_question(source, "And Melanie?", RankingWeights()) == "And Melanie?"
