"""The query path's shared pool: sized by the wiring for its store, and resized without
dropping the tasks it already holds."""

from __future__ import annotations

import threading

from confide.engine import MemoryEngine
from confide.retrieval import query
from confide.wiring import build


def test_the_wiring_sizes_the_pool_for_its_store(engine: MemoryEngine) -> None:
    size = query.workers()._max_workers
    components = build(engine=engine)
    try:
        # PostgreSQL's reads wait on the server, so more threads overlap them.
        expected = 4 if engine.storage.name == "postgres" else 2
        assert query.workers()._max_workers == expected
    finally:
        components.close()
        query.use_workers(size)  # the pool is the process's: leave it as the next test found it


def test_the_wiring_starts_the_side_reads_after_the_embedding_on_postgres_only(
    engine: MemoryEngine,
) -> None:
    size = query.workers()._max_workers
    components = build(engine=engine)
    try:
        # PostgreSQL answers them on the cores the embedding needs; SQLite's are short reads.
        expected = engine.storage.name == "postgres"
        assert components.memory_query.side_reads_after_embedding is expected
    finally:
        components.close()
        query.use_workers(size)


def test_a_resized_pool_still_runs_the_tasks_it_holds() -> None:
    before = query.workers()
    size = before._max_workers
    started, release = threading.Event(), threading.Event()

    def held() -> str:
        started.set()
        release.wait(timeout=30)
        return "done"

    pending = before.submit(held)
    assert started.wait(timeout=30)
    try:
        query.use_workers(size + 1)
        after = query.workers()
        assert after is not before and after._max_workers == size + 1
        release.set()
        assert pending.result(timeout=30) == "done"
        query.use_workers(size + 1)  # the same size again keeps the pool
        assert query.workers() is after
    finally:
        release.set()
        query.use_workers(size)
