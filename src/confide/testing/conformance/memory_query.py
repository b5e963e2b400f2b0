"""Conformance: ``memory_query`` through :class:`Confide` on both backends.

Filters, ownership, allowlists, context modes, budgets, thresholds, forgotten memories, the
full top-k under a selective filter (with PostgreSQL's HNSW path and its exact fallback),
access times and embedder mismatch. The real local MiniLM embedder is used where ranking
matters; a deterministic hashing embedder where it does not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest

from confide.client import Confide
from confide.config import RankingWeights, Settings
from confide.crypto.keyring import KeyRing
from confide.embedders import Embedder, build_embedder
from confide.engine import MemoryEngine
from confide.errors import EmbedderMismatchError, PermissionDeniedError
from confide.retrieval.access import AccessTracker
from confide.retrieval.budget import count_tokens
from confide.retrieval.categories import DEFAULT_CATEGORIES_FILE, load_categories
from confide.retrieval.memory_query import MemoryQueryService
from confide.storage import FEATURES, open_storage
from confide.storage.base import Capability, EdgeRow, Storage
from confide.testing.conformance.harness import TEST_KEK as KEK
from confide.testing.conformance.harness import StorageHarness
from confide.testing.embedders import HashingEmbedder
from confide.types import Memory, MemoryFilter, MemoryType

ACCOUNT = "acct-q"
CATEGORIES = """
categories:
  system:
    notes: {context: rag}
    profile: {context: all}
    mood: {context: rag, rag_length: 2}
  custom:
    secrets: {context: rag}
allowlists:
  coach: [notes, profile, mood]
  notes_only: [notes]
  default: ["*"]
"""


def _settings(engine: MemoryEngine, tmp_path: Path, **changes: Any) -> Settings:
    path = tmp_path / "categories.yaml"
    path.write_text(CATEGORIES, encoding="utf-8")
    return engine.settings.model_copy(update={"categories_file": path, **changes})


def _confide(engine: MemoryEngine, embedder: Embedder, tmp_path: Path, **changes: Any) -> Confide:
    return Confide(engine, embedder=embedder, settings=_settings(engine, tmp_path, **changes))


class AppFactory(Protocol):
    """Opens an :class:`Confide` over the test's engine (or ``engine``) with ``embedder``."""

    def __call__(
        self, embedder: Embedder, *, engine: MemoryEngine | None = None, **changes: Any
    ) -> Confide:
        """The new client; ``changes`` are settings to change."""
        ...


def _mem(user: str, key: str, value: str, **fields: Any) -> dict[str, Any]:
    return {
        "account_id": ACCOUNT,
        "user_id": user,
        "key": key,
        "value": value,
        "category": "notes",
        **fields,
    }


def _ids(result: Any) -> set[str]:
    return {r["id"] for r in result.results}


def _ask(app: Confide, user: str = "u1", **request: Any) -> Any:
    return app.query(
        {"agent": "coach", "account_id": ACCOUNT, "user_id": user, "query": "notes", **request}
    )


# ---- the full top-k under selective filters, at size -----------------------------------------
CROWD = 3000
LONELY = 12


def _assert_exact_top(
    vectors: dict[str, np.ndarray], ids: Sequence[str], q: np.ndarray, got: Sequence[str], k: int
) -> None:
    """``got`` is a true top-``k`` of ``ids`` (ties and float16 rescoring allowed for)."""
    scores = sorted((float(vectors[i] @ q) for i in ids), reverse=True)
    assert len(got) == k and len(set(got)) == k and set(got) <= set(ids)
    assert min(float(vectors[i] @ q) for i in got) >= scores[k - 1] - 2e-3


def _plan(storage: Storage, sql_filter: str, params: list[Any], q: np.ndarray) -> str:
    literal = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
    with storage.database.transaction() as tx:
        tx.run("SET LOCAL hnsw.iterative_scan = relaxed_order")
        rows = tx.run(
            "EXPLAIN SELECT m.id FROM embeddings e JOIN memories m ON m.id = e.memory_id "
            f"WHERE {sql_filter} ORDER BY e.embedding <=> ?::vector LIMIT 10",
            [*params, literal],
        ).fetchall()
    return "\n".join(str(r[0]) for r in rows)


class MemoryQueryConformance(StorageHarness):
    """``memory_query`` through :class:`confide.client.Confide`."""

    @pytest.fixture(scope="class")
    @classmethod
    def minilm(cls, tmp_path_factory: pytest.TempPathFactory) -> Embedder:
        """The real local MiniLM embedder, loaded once per module."""
        embedder = build_embedder("local:all-MiniLM-L6-v2", home=tmp_path_factory.mktemp("home"))
        assert embedder is not None
        embedder.embed_one("load")
        return embedder

    @pytest.fixture
    def make_app(self, engine: MemoryEngine, tmp_path: Path) -> Iterator[AppFactory]:
        """Opens clients over ``engine``; their pending access times are written before
        the storage closes."""
        default, opened = engine, list[Confide]()

        def make(
            embedder: Embedder, *, engine: MemoryEngine | None = None, **changes: Any
        ) -> Confide:
            app = _confide(engine or default, embedder, tmp_path, **changes)
            opened.append(app)
            return app

        yield make
        for app in opened:
            app.access.close()

    # ---- filters and ownership -------------------------------------------------------------------
    @pytest.fixture
    def varied(self, make_app: AppFactory) -> tuple[Confide, list[Memory], list[Memory]]:
        """Memories of ``u1`` varying every filterable field, in two batches (two update times)."""
        app = make_app(HashingEmbedder())
        first = app.engine.store_many(
            [
                _mem("u1", f"a{i}", f"note number {i} about walks", **fields)
                for i, fields in enumerate[dict[str, Any]](
                    [
                        {"agent_id": "ag1", "run_id": "r1", "actor_id": "x1", "role": "user"},
                        {"agent_id": "ag2", "run_id": "r2", "actor_id": "x2", "role": "assistant"},
                        {"type": MemoryType.PREFERENCE, "importance": 5, "pinned": True},
                        {"type": MemoryType.EPISODIC, "importance": 1, "subject_id": "s1"},
                    ]
                )
            ]
        )
        second = app.engine.store_many(
            [
                _mem("u1", "b0", "note about the garden", visibility="shared", importance=4),
                _mem("u1", "b1", "note about the kitchen", category="mood", importance=3),
            ]
        )
        return app, first, second

    def test_every_filter_runs_in_the_query(
        self,
        varied: tuple[Confide, list[Memory], list[Memory]],
    ) -> None:
        app, first, second = varied
        everything = [*first, *second]
        cut = second[0].updated_at
        cases: list[tuple[dict[str, Any], set[str]]] = [
            ({"agent_id": "ag1"}, {first[0].id}),
            ({"run_id": "r2"}, {first[1].id}),
            ({"actor_id": "x1"}, {first[0].id}),
            ({"role": "assistant"}, {first[1].id}),
            ({"subject_id": "s1"}, {first[3].id}),
            ({"category": "mood"}, {second[1].id}),
            ({"type": "preference"}, {first[2].id}),
            ({"visibility": "shared"}, {second[0].id}),
            ({"pinned": True}, {first[2].id}),
            ({"importance_min": 4}, {first[2].id, second[0].id}),
            ({"importance_max": 1}, {first[3].id}),
            ({"importance_min": 3, "importance_max": 4}, {second[0].id, second[1].id}),
            ({"updated_after": cut.isoformat()}, {m.id for m in second}),
            ({"updated_before": cut.isoformat()}, {m.id for m in first}),
            ({}, {m.id for m in everything}),
        ]
        for filters, expected in cases:
            got = _ask(app, filters=filters, top_k=20, query="note")
            assert _ids(got) == expected, filters

    def test_a_user_sees_own_and_shared_never_anothers_private(self, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder())
        own = app.engine.store(_mem("u1", "mine", "note on tea"))
        own_about = app.engine.store(_mem("u1", "mine_s", "note on tea for s1", subject_id="s1"))
        theirs = app.engine.store(_mem("u2", "theirs", "note on tea, private"))
        shared = app.engine.store(_mem("u2", "open", "note on tea, shared", visibility="shared"))
        shared_s1 = app.engine.store(
            _mem("u3", "open_s1", "note on tea about s1", visibility="shared", subject_id="s1")
        )
        private_s1 = app.engine.store(
            _mem("u3", "closed_s1", "note on tea about s1", subject_id="s1")
        )
        assert _ids(_ask(app, query="tea", top_k=20)) == {own.id, own_about.id, shared.id}
        about = _ids(_ask(app, query="tea", top_k=20, filters={"subject_id": "s1"}))
        assert about == {own_about.id, shared_s1.id}
        seen_by_u2 = _ids(_ask(app, user="u2", query="tea", top_k=20))
        assert seen_by_u2 == {theirs.id, shared.id}
        for ids in (about, seen_by_u2):
            assert private_s1.id not in ids

    def test_keyword_search_finds_shared_words_the_asker_never_used(
        self, engine: MemoryEngine, tmp_path: Path
    ) -> None:
        """Without an embedder, another user's shared memory is found by words the asker has
        in none of their own memories (nor has any memory at all)."""
        app = Confide(engine, embedder=None, settings=_settings(engine, tmp_path))
        shared = engine.store(
            _mem("u2", "open", "The okapi sanctuary opens in March.", visibility="shared")
        )
        engine.store(_mem("u3", "closed", "An okapi sanctuary donation is planned."))
        assert _ids(_ask(app, query="okapi sanctuary")) == {shared.id}
        own = engine.store(_mem("u1", "mine", "Lunch with Dana at the harbour on Sunday."))
        found = _ids(_ask(app, query="okapi sanctuary"))
        assert found == {shared.id}
        assert _ids(_ask(app, query="harbour lunch")) == {own.id}
        app.access.close()

    def test_shared_memories_reach_listing_and_retrieval_with_one_check(
        self, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        app = make_app(HashingEmbedder())
        own = app.engine.store(_mem("u1", "mine", "note on tea"))
        listed = app.engine.store(
            _mem("u2", "home", "lives by the sea", category="profile", visibility="shared")
        )
        found = app.engine.store(_mem("u2", "open", "note on tea, shared", visibility="shared"))
        storage = app.engine.storage
        asked: list[MemoryFilter] = []
        check = storage.has_others_shared

        def counted(flt: MemoryFilter) -> bool:
            asked.append(flt)
            return check(flt)

        monkeypatch.setattr(storage, "has_others_shared", counted)
        assert {own.id, listed.id, found.id} <= _ids(_ask(app, query="tea", top_k=20))
        assert len(asked) == 1  # the listing and the retrieval share one existence check

    # ---- allowlists and context modes ------------------------------------------------------------
    def test_allowlists_are_enforced_whatever_the_filters(self, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder())
        secret = app.engine.store(_mem("u1", "s", "note kept secret", category="secrets"))
        base = {"account_id": ACCOUNT, "user_id": "u1", "query": "note secret"}
        with pytest.raises(PermissionDeniedError):
            app.query({**base, "agent": "stranger"})
        with pytest.raises(PermissionDeniedError):
            app.query({**base, "agent": "stranger", "filters": {"category": "notes"}})
        with pytest.raises(PermissionDeniedError):
            app.query({**base, "agent": "coach", "categories": ["secrets"]})
        with pytest.raises(PermissionDeniedError):
            app.query({**base, "agent": "coach", "filters": {"category": "secrets"}})
        with pytest.raises(PermissionDeniedError):
            app.query({**base, "agent": "notes_only", "categories": ["notes", "profile"]})
        with pytest.raises(PermissionDeniedError):
            app.query({**base, "agent": "coach", "categories": ["no_such_category"]})
        assert secret.id not in _ids(app.query({**base, "agent": "coach", "top_k": 50}))
        assert secret.id in _ids(app.query({**base, "agent": "default", "top_k": 50}))

    def test_context_all_always_included_rag_capped(self, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder())
        profile = app.engine.store_many(
            [_mem("u1", f"p{i}", f"lives in city {i}", category="profile") for i in range(3)]
        )
        moods = app.engine.store_many(
            [_mem("u1", f"m{i}", f"felt happy about rain {i}", category="mood") for i in range(6)]
        )
        got = _ask(app, query="happy rain", top_k=10)
        ids = _ids(got)
        assert {m.id for m in profile} <= ids
        assert len(ids & {m.id for m in moods}) == 2
        contexts = {
            r["id"]: r.get("context") for r in _ask(app, query="x", **{"return": "full"}).results
        }
        assert all(contexts[m.id] == "all" for m in profile)
        # A ``context: all`` category asked for alone retrieves nothing: the listing (started
        # without a question to embed) is the whole answer.
        alone = _ask(app, query="happy rain", filters={"category": "profile"})
        assert _ids(alone) == {m.id for m in profile}

    def test_procedural_memories_come_only_when_asked_for(self, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder(), categories_file=DEFAULT_CATEGORIES_FILE)
        owner = {"account_id": ACCOUNT, "user_id": "u1"}
        steps = app.engine.store(
            {**owner, "key": "tea_steps", "type": "procedural",
             "value": "1. Boil the water.\n2. Steep the tea for four minutes."}
        )  # fmt: skip
        liking = app.engine.store(
            {**owner, "key": "tea", "type": "preference", "value": "likes strong tea"}
        )
        request = {"agent": "default", **owner, "query": "how to make the tea", "top_k": 10}
        default = app.query(request)
        # Neither a context: all listing nor retrieval, and not in the delta header either.
        assert liking.id in _ids(default) and steps.id not in _ids(default)
        assert "likes strong tea" in default.header and "Boil" not in default.header
        asked = app.query({**request, "categories": ["procedural"]})
        assert _ids(asked) == {steps.id}
        assert asked.results[0]["text"].startswith("[procedural] tea steps: 1. Boil the water.")

    def test_top_k_ranked_results_come_before_the_context_all_listing(
        self, make_app: AppFactory
    ) -> None:
        app = make_app(HashingEmbedder())
        profile = app.engine.store_many(
            [_mem("u1", f"p{i}", f"lives in city {i}", category="profile") for i in range(3)]
        )
        notes = app.engine.store_many(
            [
                _mem("u1", "n0", "the dog is called Biscuit"),
                _mem("u1", "n1", "the dog Biscuit likes the beach"),
                _mem("u1", "n2", "bought new running shoes"),
            ]
        )
        got = [r["id"] for r in _ask(app, query="dog Biscuit", top_k=2).results]
        # The two ranked answers first, then every ``context: all`` memory (still included).
        assert set(got[:2]) == {notes[0].id, notes[1].id}
        assert set(got[2:]) == {m.id for m in profile}
        assert notes[2].id not in got

    @pytest.mark.parametrize("followed", [True, False], ids=["edges-followed", "edges-unread"])
    def test_related_memories_follow_the_ranked_bullets_within_the_rules(
        self, make_app: AppFactory, followed: bool
    ) -> None:
        # With adjacency weighed, retrieval follows the best candidates' edges and the
        # related memories come from what it read; without, they are read for the answer.
        ranking = RankingWeights() if followed else RankingWeights(w_adjacent=0.0)
        app = make_app(HashingEmbedder(), link_top_k=0, ranking=ranking)  # only these edges
        dog, walk, vet, tea, sofa, gone = app.engine.store_many(
            [
                _mem("u1", "dog", "the dog Biscuit is a beagle"),
                _mem("u1", "walk", "walks by the river every morning"),
                _mem("u1", "vet", "the vet visit is on Friday"),
                _mem("u1", "tea", "likes green tea"),
                _mem("u1", "sofa", "the dog sleeps on the sofa"),
                _mem("u1", "gone", "used to live in Leeds"),
            ]
        )
        secret = app.engine.store(_mem("u1", "secret", "a secret kept", category="secrets"))
        theirs = app.engine.store(_mem("u2", "theirs", "another user's private note"))
        moods = app.engine.store_many(
            [_mem("u1", f"m{i}", f"felt happy in the rain {i}", category="mood") for i in range(3)]
        )
        app.engine.forget(gone.id, account_id=ACCOUNT)
        edges = [
            # Stronger than the rest, but outside the request's filter: never shown.
            EdgeRow(dog.id, gone.id, "related_to", 0.99),
            EdgeRow(secret.id, dog.id, "related_to", 0.98),
            EdgeRow(dog.id, theirs.id, "related_to", 0.97),
            EdgeRow(dog.id, walk.id, "related_to", 0.9),
            EdgeRow(vet.id, dog.id, "related_to", 0.6),
            EdgeRow(dog.id, tea.id, "related_to", 0.5),
            EdgeRow(sofa.id, tea.id, "related_to", 0.95),
            EdgeRow(moods[0].id, moods[2].id, "related_to", 0.9),
            EdgeRow(moods[1].id, moods[2].id, "related_to", 0.9),
        ]
        with app.engine.storage.transaction() as tx:
            tx.put_edges(ACCOUNT, "u1", edges)
        got = _ask(app, query="dog Biscuit beagle", top_k=1).results
        # The ranked result first, then the two strongest related memories the agent may
        # read, marked as related.
        assert [r["id"] for r in got] == [dog.id, walk.id, vet.id]
        assert got[1] == {
            "id": walk.id,
            "category": "notes",
            "text": "[related] [notes] walk: walks by the river every morning",
            "related_to": dog.id,
        }
        assert "related_to" not in got[0]
        # Two at most, whatever the ranked results: the best result's first.
        two = _ask(app, query="dog Biscuit beagle sofa", top_k=2).results
        assert [r["id"] for r in two[:2]] == [dog.id, sofa.id]
        assert [r["id"] for r in two[2:]] == [walk.id, vet.id]
        # A category's rag_length counts them: mood's two ranked leave no room.
        happy = _ask(app, query="felt happy rain", top_k=5, categories=["mood"]).results
        assert len(happy) == 2 and {r["id"] for r in happy} <= {m.id for m in moods}
        # Within the budget, after the ranked result: the related ones give way first.
        first = count_tokens(got[0]["text"]) + 1
        tight = _ask(app, query="dog Biscuit beagle", top_k=1, budget_tokens=first)
        assert [r["id"] for r in tight.results] == [dog.id] and tight.tokens <= first
        # The full form keeps them on each result, unmarked.
        full = _ask(app, query="dog Biscuit beagle", top_k=1, **{"return": "full"}).results
        assert [r["id"] for r in full] == [dog.id]
        assert [r["id"] for r in full[0]["related"]] == [walk.id, vet.id]

    def test_concurrent_queries_each_get_their_own_answer(self, make_app: AppFactory) -> None:
        # More queries at once than the query path has worker threads: each query hands work to
        # the pool, and none of that work may wait on another task (or the pool would deadlock).
        app = make_app(HashingEmbedder())
        users = [f"c{i}" for i in range(12)]
        stored = {
            user: app.engine.store_many(
                [_mem(user, f"k{j}", f"{user} walked the dog {j}", run_id="r") for j in range(5)]
            )
            for user in users
        }
        pool = ThreadPoolExecutor(max_workers=len(users))
        try:  # a deadlock fails the test (TimeoutError) instead of hanging it
            asked = pool.map(
                lambda u: _ask(app, u, query="walked dog", top_k=5), users, timeout=120
            )
            answers = dict(zip(users, asked, strict=True))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        for user in users:
            assert _ids(answers[user]) == {m.id for m in stored[user]}

    # ---- budgets and thresholds ------------------------------------------------------------------
    def test_answer_never_exceeds_the_token_budget(self, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder())
        app.engine.store_many(
            [
                _mem("u1", f"k{i}", "note " + " ".join(f"word{j}" for j in range(3 + 7 * i)))
                for i in range(12)
            ]
        )
        for budget in (5, 20, 60, 200):
            for shape in ("bullets", "full"):
                got = _ask(
                    app, query="note word1", top_k=12, budget_tokens=budget, **{"return": shape}
                )
                assert got.tokens <= budget
                if shape == "bullets":
                    assert sum(count_tokens(r["text"]) + 1 for r in got.results) <= budget
        unlimited = _ask(app, query="note word1", top_k=12)
        assert len(unlimited.results) == 12

    @pytest.mark.slow
    def test_threshold_and_ranking_with_the_real_embedder(
        self, make_app: AppFactory, minilm: Embedder
    ) -> None:
        app = make_app(minilm)
        daughter = app.engine.store(_mem("u1", "daughter_name", "My daughter is called Emma."))
        dog = app.engine.store(
            _mem("u1", "dog", "We adopted a beagle puppy named Rex last spring.")
        )
        app.engine.store_many(
            [
                _mem("u1", "car", "The car needs new tyres before winter."),
                _mem("u1", "tax", "Quarterly tax forms are due at the end of the month."),
                _mem("u1", "guitar", "I practise the guitar on Tuesday evenings."),
            ]
        )
        top = _ask(app, query="What is my daughter's name?", top_k=3, **{"return": "full"})
        assert top.results[0]["id"] == daughter.id
        pets = _ask(
            app, query="Tell me about our pet dog", top_k=5, threshold=0.3, **{"return": "full"}
        )
        assert [r["id"] for r in pets.results] == [dog.id]
        assert all(r["similarity"] >= 0.3 for r in pets.results)

    # ---- forgotten memories ----------------------------------------------------------------------
    def test_soft_deleted_and_purged_never_come_back(self, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder())
        kept, forgotten, purged = app.engine.store_many(
            [_mem("u1", f"k{i}", "note about the blue bicycle") for i in range(3)]
        )
        app.engine.forget(purged.id, account_id=ACCOUNT)
        later = (datetime.now() + timedelta(days=3650)).timestamp()
        assert app.engine.purge_expired(now=later).purged == 1
        app.engine.forget(forgotten.id, account_id=ACCOUNT)
        for query in ("blue bicycle", "note"):
            assert _ids(_ask(app, query=query, top_k=10)) == {kept.id}
        app.engine.restore(forgotten.id, account_id=ACCOUNT)
        assert _ids(_ask(app, query="blue bicycle", top_k=10)) == {kept.id, forgotten.id}

    # ---- access times and embedder binding -------------------------------------------------------
    def test_last_accessed_at_is_written_by_the_tracker(
        self, engine: MemoryEngine, make_app: AppFactory
    ) -> None:
        app = make_app(HashingEmbedder())
        read, unread = app.engine.store_many(
            # Unread: in a category the agent may not read, so never related to the answer.
            [_mem("u1", "r", "note about apples"), _mem("u1", "n", "sink", category="secrets")]
        )
        tracker = AccessTracker(engine.storage, interval=3600)
        service = MemoryQueryService(
            engine,
            load_categories(app.settings.categories_file),
            embedder=app.embedder,
            access=tracker,
        )
        got = service.query(
            {
                "agent": "coach",
                "account_id": ACCOUNT,
                "user_id": "u1",
                "query": "apples",
                "top_k": 1,
            }
        )
        assert _ids(got) == {read.id}
        assert engine.get(read.id, account_id=ACCOUNT).last_accessed_at is None
        assert tracker.flush() == 1
        assert engine.get(read.id, account_id=ACCOUNT).last_accessed_at is not None
        assert engine.get(unread.id, account_id=ACCOUNT).last_accessed_at is None
        tracker.close()

    def test_embedder_mismatch_is_refused(self, engine: MemoryEngine, make_app: AppFactory) -> None:
        app = make_app(HashingEmbedder())
        app.engine.store(_mem("u1", "k", "note"))
        other = MemoryEngine(engine.storage, engine.keyring, settings=engine.settings)
        with pytest.raises(EmbedderMismatchError, match="reindex"):
            make_app(HashingEmbedder("another-model", 32), engine=other)
        with pytest.raises(EmbedderMismatchError, match="hashing:64"):
            make_app(HashingEmbedder("hashing", 32), engine=other)

    @pytest.fixture(scope="class")
    @classmethod
    def crowded(
        cls, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[tuple[Confide, dict[str, np.ndarray]]]:
        """A few thousand memories of one busy user, a rare category, and one lonely user."""
        tmp = tmp_path_factory.mktemp("crowd")
        storage = open_storage(cls().new_storage_url(tmp, request), pool_max=4)
        settings = Settings(home=tmp / "home", encryption_key=KEK.hex())
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
        app = _confide(engine, HashingEmbedder(), tmp, link_top_k=0)
        words = [f"w{i}" for i in range(400)]
        rng = np.random.default_rng(7)

        def sentence() -> str:
            return "note " + " ".join(rng.choice(words, size=8))

        for start in range(0, CROWD, 500):
            app.engine.store_many(
                [
                    _mem("busy", f"k{i}", sentence(), category="mood" if i % 300 == 0 else "notes")
                    for i in range(start, min(start + 500, CROWD))
                ]
            )
        app.engine.store_many([_mem("lonely", f"k{i}", sentence()) for i in range(LONELY)])
        if Capability.HNSW in storage.capabilities:  # the planner weighs the graph by statistics
            with storage.database.transaction() as tx:
                tx.run("ANALYZE")
        busy = app.engine.list_memories(
            MemoryFilter(account_id=ACCOUNT, user_id="busy"), limit=5000
        )
        lonely = app.engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="lonely"))
        vectors = storage.vectors(ACCOUNT, [m.id for m in [*busy, *lonely]])
        try:
            yield app, vectors
        finally:
            app.close()

    def test_lonely_user_gets_the_full_top_k(
        self,
        crowded: tuple[Confide, dict[str, np.ndarray]],
    ) -> None:
        app, vectors = crowded
        storage = app.engine.storage
        flt = MemoryFilter(account_id=ACCOUNT, user_id="lonely")
        q = HashingEmbedder().embed_one("note w1 w2 w3")
        hits = storage.vector_search(flt, q, 10)
        lonely_ids = [m.id for m in app.engine.list_memories(flt)]
        _assert_exact_top(vectors, lonely_ids, q, [h.memory_id for h in hits], 10)
        got = _ask(app, user="lonely", query="note w1 w2 w3", top_k=10)
        assert len(got.results) == 10 and _ids(got) <= set(lonely_ids)

    def test_selective_filter_of_a_busy_user_gets_the_full_top_k(
        self,
        crowded: tuple[Confide, dict[str, np.ndarray]],
    ) -> None:
        app, vectors = crowded
        flt = MemoryFilter(account_id=ACCOUNT, user_id="busy", categories=("mood",))
        rare = [m.id for m in app.engine.list_memories(flt)]
        assert len(rare) == CROWD // 300
        q = HashingEmbedder().embed_one("note w5 w6")
        hits = app.engine.storage.vector_search(flt, q, 5)
        _assert_exact_top(vectors, rare, q, [h.memory_id for h in hits], 5)
        got = _ask(app, user="busy", query="note w5 w6", top_k=5, filters={"category": "mood"})
        assert len(got.results) == 2  # mood has rag_length 2
        crowd = _ask(app, user="busy", query="note w5 w6", top_k=25, filters={"category": "notes"})
        assert len(crowd.results) == 25

    def test_postgres_takes_the_hnsw_path_and_falls_back_to_exact(
        self,
        crowded: tuple[Confide, dict[str, np.ndarray]],
    ) -> None:
        app, vectors = crowded
        storage = app.engine.storage
        if Capability.HNSW not in storage.capabilities:
            pytest.skip(f"the {storage.name} storage lacks hnsw")
        q = HashingEmbedder().embed_one("note w9 w10")
        plan = _plan(storage, "m.account_id = ? AND m.user_id = ?", [ACCOUNT, "busy"], q)
        assert "embeddings_hnsw" in plan  # a large owner is searched through the index
        # Force HNSW for a selective filter and cap its iterative scan, so the index alone comes
        # up short: the exact fallback must still return the full top-k.
        with storage.database.transaction() as tx:
            run = tx.run
            dbname = run("SELECT current_database()").fetchone()[0]
            run(f'ALTER DATABASE "{dbname}" SET hnsw.max_scan_tuples = 20')
            run(f'ALTER DATABASE "{dbname}" SET enable_sort = off')
        from confide.storage.postgres import PostgresStorage

        assert isinstance(storage, PostgresStorage)  # the plan below is PostgreSQL's
        capped = PostgresStorage(storage.conninfo, max_size=1, ef_search=10, features=FEATURES)
        try:
            flt = MemoryFilter(account_id=ACCOUNT, user_id="busy", categories=("mood",))
            sql_filter = "m.user_id = ? AND m.category = ?"
            assert "embeddings_hnsw" in _plan(capped, sql_filter, ["busy", "mood"], q)
            literal = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
            with capped.transaction() as tx:
                bare = tx.run(
                    "SELECT m.id FROM embeddings e JOIN memories m ON m.id = e.memory_id "
                    f"WHERE {sql_filter} ORDER BY e.embedding <=> ?::vector LIMIT 5",
                    ["busy", "mood", literal],
                ).fetchall()
            assert len(bare) < 5
            rare = [m.id for m in app.engine.list_memories(flt)]
            hits = capped.vector_search(flt, q, 5)
            _assert_exact_top(vectors, rare, q, [h.memory_id for h in hits], 5)
        finally:
            capped.close()
            with storage.database.transaction() as tx:
                run = tx.run
                run(f'ALTER DATABASE "{dbname}" RESET hnsw.max_scan_tuples')
                run(f'ALTER DATABASE "{dbname}" RESET enable_sort')

    def test_a_tampered_row_is_left_out_of_the_answer(
        self, engine: MemoryEngine, make_app: AppFactory
    ) -> None:
        app = make_app(HashingEmbedder())
        stored = app.engine.store_many(
            [_mem("u1", f"n{i}", f"note number {i} about walks") for i in range(3)]
        )
        with engine.storage.database.transaction() as tx:
            tx.run("UPDATE memories SET category = 'mood' WHERE id = ?", [stored[0].id])
        assert _ids(_ask(app, query="note about walks")) == {m.id for m in stored[1:]}
        assert engine.integrity_failures > 0
