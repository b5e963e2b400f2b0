"""bench/_compare.py on a small embedded store: both arms answered, the setting in force only
for its own arm, everything restored afterwards."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _compare import InlinePool, compare, parse_setting
from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders.base import Vector
from confide.embedders.local import LocalMiniLMEmbedder
from confide.engine import MemoryEngine
from confide.retrieval import query as query_path
from confide.storage import FEATURES, postgres, vector_kernels
from confide.storage.postgres import PostgresStorage
from confide.storage.sql import Bm25Score, SqlStorage
from confide.storage.sqlite import SqliteStorage
from confide.storage.sqlite_vectors import SqliteVectorIndex

KEK = bytes(range(32))
QUESTIONS = ["Who adopted Coco?", "Where did Liam run?", "What did Maya adopt?"]


def _request(question: str) -> dict[str, Any]:
    return {"agent": "default", "account_id": "a", "user_id": "u", "query": question}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Confide]:
    storage = SqliteStorage(tmp_path / "confide.db", features=FEATURES)
    storage.migrate()
    settings = Settings(home=tmp_path / "home", encryption_key=KEK.hex())
    engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
    confide = Confide(engine, embedder=LocalMiniLMEmbedder(), settings=settings)
    confide.engine.store_many(
        [
            {"account_id": "a", "user_id": "u", "key": "note", "value": value}
            for value in ("Maya adopted a puppy named Coco", "Liam ran a half marathon")
        ]
    )
    try:
        yield confide
    finally:
        confide.close()


@contextmanager
def _on_each_lexical_search(note: Callable[[SqlStorage], None]) -> Iterator[None]:
    """Within the block, every lexical search calls ``note`` with its store, then searches."""
    real = SqlStorage.lexical_search

    def watched(self: SqlStorage, *args: Any, **kwargs: Any) -> Any:
        note(self)
        return real(self, *args, **kwargs)

    SqlStorage.lexical_search = watched  # type: ignore[method-assign]
    try:
        yield
    finally:
        SqlStorage.lexical_search = real  # type: ignore[method-assign]


def test_each_question_is_answered_both_ways_and_the_budget_is_restored(app: Confide) -> None:
    storage = app.engine.storage
    assert isinstance(storage, SqlStorage)
    configured = storage.lexical
    budgets: list[int] = []
    with _on_each_lexical_search(lambda store: budgets.append(store.lexical.postings_budget)):
        found = compare(app, "postings-budget=7", QUESTIONS, _request, warm=0)
    assert storage.lexical is configured
    assert found["setting"] == "postings-budget=7"
    assert found["questions"] == len(QUESTIONS)
    assert found["configured_p50_ms"] > 0 and found["changed_p50_ms"] > 0
    # One lexical search per answer: configured first, then changed, then the other way round.
    default = configured.postings_budget
    assert budgets == [default, 7, 7, default, default, 7]


def test_sampling_over_the_budget_is_switched_off_in_the_changed_arm_only(app: Confide) -> None:
    storage = app.engine.storage
    assert isinstance(storage, SqlStorage)
    configured = storage.lexical
    assert configured.sample_over_budget
    sampled: list[bool] = []
    with _on_each_lexical_search(lambda store: sampled.append(store.lexical.sample_over_budget)):
        compare(app, "sample-over-budget=off", QUESTIONS[:2], _request, warm=0)
    assert storage.lexical is configured
    assert sampled == [True, False, False, True]
    with pytest.raises(ValueError, match="on or off"):
        compare(app, "sample-over-budget=7", QUESTIONS[:1], _request, warm=0)


def test_one_term_searches_add_up_their_postings_in_the_changed_arm_only(
    app: Confide, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = app.engine.storage
    assert isinstance(storage, SqlStorage)
    real = SqlStorage._owner_postings
    grouped: list[bool] = []

    def watched(self: SqlStorage, db: Any, flt: Any, score: Bm25Score, *a: Any, **k: Any) -> Any:
        grouped.append(bool(score.group_by))
        return real(self, db, flt, score, *a, **k)

    monkeypatch.setattr(SqlStorage, "_owner_postings", watched)
    compare(app, "one-term=grouped", ["Coco?", "Liam?"], _request, warm=0)
    assert grouped == [False, True, True, False]
    assert "_bm25_expression" not in vars(storage)
    with pytest.raises(ValueError, match="grouped"):
        compare(app, "one-term=summed", QUESTIONS[:1], _request, warm=0)


def test_no_query_workers_answers_on_the_callers_thread(
    app: Confide, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = query_path.workers()
    threads: set[str] = set()
    # The pool's one thread may still be on the side reads when the question is embedded;
    # a query would then take its lexical search back. Waiting for the worker keeps the
    # configured arm on it whatever this machine's speed.
    monkeypatch.setattr(query_path, "_run_unstarted", False)
    with _on_each_lexical_search(lambda _: threads.add(threading.current_thread().name)):
        compare(app, "query-workers=0", QUESTIONS[:1], _request, warm=0)
    assert query_path.workers() is shared
    # As configured the lexical search runs on a worker; with no workers, on this thread.
    assert threading.current_thread().name in threads
    assert any(name.startswith("confide-query") for name in threads)


def test_precision_embeds_the_changed_arms_questions_by_the_other_graph(app: Confide) -> None:
    embedder = app.memory_query.embedder
    assert isinstance(embedder, LocalMiniLMEmbedder) and embedder.precision == "int8"
    used: list[str] = []
    real = LocalMiniLMEmbedder.embed_one

    def watched(self: LocalMiniLMEmbedder, text: str) -> Any:
        used.append(self.precision)
        return real(self, text)

    LocalMiniLMEmbedder.embed_one = watched  # type: ignore[method-assign]
    try:
        compare(app, "precision=float32", QUESTIONS[:2], _request, warm=0)
    finally:
        LocalMiniLMEmbedder.embed_one = real  # type: ignore[method-assign]
    assert used == ["int8", "float32", "float32", "int8"]
    assert embedder.precision == "int8"
    with pytest.raises(ValueError, match="float32, int8"):
        compare(app, "precision=float16", QUESTIONS[:1], _request, warm=0)


@pytest.mark.parametrize("text", ["postings-budget", "budget=3", "postings-budget="])
def test_a_setting_must_be_a_known_name_and_a_value(text: str) -> None:
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_setting(text)


def _seen_per_search(
    app: Confide, setting: str, observe: Callable[[SqliteVectorIndex], Any]
) -> list[Any]:
    """What ``observe`` saw of the SQLite vector index at each search of ``compare(setting)``."""
    index_type = type(_vector_index(app))
    seen: list[Any] = []
    real = index_type.search

    def watched(self: SqliteVectorIndex, *args: Any, **kwargs: Any) -> Any:
        seen.append(observe(self))
        return real(self, *args, **kwargs)

    index_type.search = watched  # type: ignore[method-assign]
    try:
        compare(app, setting, QUESTIONS[:2], _request, warm=0)
    finally:
        index_type.search = real  # type: ignore[method-assign]
    return seen


def _vector_index(app: Confide) -> SqliteVectorIndex:
    storage = app.engine.storage
    assert isinstance(storage, SqliteStorage)
    return storage.vector_index


def test_partitions_off_reads_every_row_in_the_changed_arm_only(app: Confide) -> None:
    seen = _seen_per_search(app, "partitions=off", lambda index: index.partitions)
    assert seen == [True, False, False, True]
    assert _vector_index(app).partitions
    with pytest.raises(ValueError, match="must be off"):
        compare(app, "partitions=on", QUESTIONS[:1], _request, warm=0)


def test_head_chunks_sorts_the_whole_shortlist_in_the_changed_arm_only(app: Confide) -> None:
    configured = _vector_index(app).head_chunks
    seen = _seen_per_search(app, "head-chunks=0", lambda index: index.head_chunks)
    assert seen == [configured, 0, 0, configured]
    assert _vector_index(app).head_chunks == configured
    with pytest.raises(ValueError, match="0 or more"):
        compare(app, "head-chunks=-1", QUESTIONS[:1], _request, warm=0)


def test_index_loops_before_are_in_force_in_the_changed_arm_only(app: Confide) -> None:
    pytest.importorskip("numba")
    configured = vector_kernels._chosen()
    seen = _seen_per_search(
        app,
        "index-loops=before",
        lambda _: vector_kernels._chosen()[2] is vector_kernels._within_numpy,
    )
    assert seen == [False, True, True, False]
    assert vector_kernels._chosen() is configured
    with pytest.raises(ValueError, match="must be before"):
        compare(app, "index-loops=after", QUESTIONS[:1], _request, warm=0)


def test_delta_header_on_the_caller_asks_after_the_answer_in_its_arm_only(app: Confide) -> None:
    service = app.memory_query
    configured = service.deltas
    assert configured is not None
    seen: list[str] = []
    real_due, real_deliver = MemoryEngine.has_unseen_delta, MemoryEngine.deliver_delta

    def due(self: MemoryEngine, **kwargs: Any) -> bool:
        seen.append("due on " + ("caller" if _on_caller() else "worker"))
        return real_due(self, **kwargs)

    def deliver(self: MemoryEngine, **kwargs: Any) -> str:
        seen.append("deliver")
        return real_deliver(self, **kwargs)

    MemoryEngine.has_unseen_delta = due  # type: ignore[method-assign,assignment]
    MemoryEngine.deliver_delta = deliver  # type: ignore[method-assign,assignment]
    try:
        compare(app, "delta-header=caller", QUESTIONS[:1], _request, warm=0)
    finally:
        MemoryEngine.has_unseen_delta = real_due  # type: ignore[method-assign]
        MemoryEngine.deliver_delta = real_deliver  # type: ignore[method-assign]
    # The two stored memories are the reader's news. The configured arm finds that out on a
    # worker, then delivers (the delivery asks again, on the caller, as it claims the news);
    # the changed arm goes straight to the delivery, which finds nothing new by then.
    configured_arm = ["due on worker", "deliver", "due on caller"]
    assert seen == [*configured_arm, "deliver", "due on caller"]
    assert service.deltas is configured


def test_side_reads_after_the_embedding_start_after_it_in_their_arm_only(app: Confide) -> None:
    service = app.memory_query
    seen: list[str] = []
    real_due, real_embed = MemoryEngine.has_unseen_delta, LocalMiniLMEmbedder.embed_one

    def due(self: MemoryEngine, **kwargs: Any) -> bool:
        seen.append("due")
        return real_due(self, **kwargs)

    def embed_one(self: LocalMiniLMEmbedder, text: str) -> Any:
        vector = real_embed(self, text)
        seen.append("embedded")
        return vector

    pool = query_path._executor
    # Tasks run as they are submitted, so the order they start in is the order seen.
    query_path._executor = InlinePool()  # type: ignore[assignment]
    MemoryEngine.has_unseen_delta = due  # type: ignore[method-assign,assignment]
    LocalMiniLMEmbedder.embed_one = embed_one  # type: ignore[method-assign]
    try:
        compare(app, "side-reads=after-embedding", QUESTIONS[:1], _request, warm=0)
    finally:
        query_path._executor = pool
        MemoryEngine.has_unseen_delta = real_due  # type: ignore[method-assign]
        LocalMiniLMEmbedder.embed_one = real_embed  # type: ignore[method-assign]
    # On SQLite the check starts with the question (and finds the two stored memories new;
    # delivering them asks again); in the changed arm it starts once the question is
    # embedded and finds nothing new by then.
    assert seen == ["due", "embedded", "due", "embedded", "due"]
    assert service.side_reads_after_embedding is False
    with pytest.raises(ValueError, match="after-embedding"):
        compare(app, "side-reads=later", QUESTIONS[:1], _request, warm=0)


def _on_caller() -> bool:
    return threading.current_thread() is threading.main_thread()


def test_common_names_in_two_reads_in_its_arm_only(app: Confide) -> None:
    storage = app.engine.storage
    assert isinstance(storage, SqlStorage)
    seen: list[str] = []
    real_stats, real_together = SqlStorage._owner_stats, SqlStorage._documents_and_frequencies

    def stats(self: SqlStorage, *args: Any) -> tuple[int, float]:
        seen.append("documents and length")
        return real_stats(self, *args)

    def together(self: SqlStorage, *args: Any, **kwargs: Any) -> tuple[int, dict[int, int]]:
        seen.append("documents and terms")
        return real_together(self, *args, **kwargs)

    SqlStorage._owner_stats = stats  # type: ignore[method-assign,assignment]
    SqlStorage._documents_and_frequencies = together  # type: ignore[method-assign]
    try:
        compare(app, "common-names=two-reads", QUESTIONS[:1], _request, warm=0)
    finally:
        SqlStorage._owner_stats = real_stats  # type: ignore[method-assign]
        SqlStorage._documents_and_frequencies = real_together  # type: ignore[method-assign]
    # Two memories: nothing is cached. Each arm's lexical search reads the document count
    # and length sample; the common-name check reads the count with the terms' counts as
    # configured, and the count with the length sample (then the terms) in the changed arm.
    assert sorted(seen) == ["documents and length"] * 3 + ["documents and terms"]
    assert "common_tokens" not in vars(storage)
    with pytest.raises(ValueError, match="two-reads"):
        compare(app, "common-names=one-read", QUESTIONS[:1], _request, warm=0)


def test_a_free_read_is_answered_from_its_recording_only_in_the_changed_arm(
    app: Confide,
) -> None:
    storage = app.engine.storage
    assert isinstance(storage, SqlStorage)
    reached: list[str] = []
    with _on_each_lexical_search(lambda _: reached.append("database")):
        found = compare(app, "free-read=lexical-search", QUESTIONS[:2], _request, warm=0)
    # Two questions recorded first, then each answered as configured (the database) and from
    # the recording.
    assert reached == ["database"] * 4
    assert found["questions"] == 2
    assert "lexical_search" not in vars(storage)
    with pytest.raises(ValueError, match="lexical-search, neighbourhood or embedding"):
        compare(app, "free-read=vector-search", QUESTIONS[:1], _request, warm=0)


def test_reads_joined_by_plus_are_all_free_in_the_changed_arm_and_restored_after(
    app: Confide,
) -> None:
    storage = app.engine.storage
    embedder = app.memory_query.embedder
    assert isinstance(storage, SqlStorage)
    assert embedder is not None
    reached: list[str] = []
    real_embed = embedder.embed_one

    def embed_one(text: str) -> Vector:
        reached.append("embedder")
        return real_embed(text)

    embedder.embed_one = embed_one  # type: ignore[method-assign]
    try:
        with _on_each_lexical_search(lambda _: reached.append("database")):
            compare(app, "free-read=lexical-search+embedding", QUESTIONS[:2], _request, warm=0)
        # Two questions recorded first, then each answered as configured and from the
        # recordings: the database and the embedder are reached by the first three passes only.
        assert sorted(reached) == ["database"] * 4 + ["embedder"] * 4
        assert "lexical_search" not in vars(storage)
        assert embedder.embed_one is embed_one
    finally:
        vars(embedder).pop("embed_one", None)


def test_waiting_idle_turns_off_running_unstarted_tasks_in_its_arm_only(
    app: Confide,
) -> None:
    runs_unstarted: list[bool] = []
    with _on_each_lexical_search(lambda _: runs_unstarted.append(query_path._run_unstarted)):
        compare(app, "waiting=idle", QUESTIONS[:1], _request, warm=0)
    assert sorted(runs_unstarted) == [False, True]
    assert query_path._run_unstarted is True
    with pytest.raises(ValueError, match="idle"):
        compare(app, "waiting=never", QUESTIONS[:1], _request, warm=0)


@pytest.fixture
def postgres_app(engine: MemoryEngine, settings: Settings) -> Iterator[Confide]:
    """:func:`app` on the suite's ``engine`` (PostgreSQL where the test asks for it)."""
    confide = Confide(engine, embedder=LocalMiniLMEmbedder(), settings=settings)
    confide.engine.store_many(
        [{"account_id": "a", "user_id": "u", "key": "note", "value": "Maya adopted Coco"}]
    )
    try:
        yield confide
    finally:
        confide.close()


@pytest.mark.parametrize("storage_url", ["postgres"], indirect=True)
def test_plans_before_are_in_force_in_the_changed_arm_only(
    postgres_app: Confide, app: Confide
) -> None:
    storage = postgres_app.engine.storage
    assert isinstance(storage, PostgresStorage)
    reusing = postgres._BinaryRows.run_reusing_plan
    seen: list[tuple[str, str]] = []

    def note(_: SqlStorage) -> None:
        with storage.reader("a") as db:
            mode = str(db.run("SHOW plan_cache_mode").fetchone()[0])
        seen.append((postgres._BinaryRows.run_reusing_plan.__qualname__, mode))

    with _on_each_lexical_search(note):
        compare(postgres_app, "plans=before", QUESTIONS[:2], _request, warm=0)
    configured = ("_BinaryRows.run_reusing_plan", "auto")
    before = ("SqlExecutor.run", "force_custom_plan")
    assert seen == [configured, before, before, configured]
    assert postgres._BinaryRows.run_reusing_plan is reusing
    assert "_scope_session" not in vars(storage)
    with pytest.raises(ValueError, match="needs a PostgreSQL store"):
        compare(app, "plans=before", QUESTIONS[:1], _request, warm=0)
    with pytest.raises(ValueError, match="must be before"):
        compare(postgres_app, "plans=after", QUESTIONS[:1], _request, warm=0)
