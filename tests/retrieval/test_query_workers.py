"""The query path's shared pool: sized by the wiring for its store, and resized without
dropping the tasks it already holds."""

from __future__ import annotations

import threading

import pytest

from confide.engine import MemoryEngine
from confide.retrieval import query
from confide.wiring import build


def test_the_wiring_sizes_the_pool_for_its_store(engine: MemoryEngine) -> None:
    size = query.workers()._max_workers
    components = build(engine=engine)
    try:
        # PostgreSQL's reads wait on the server, so more threads overlap them.
        expected = 4 if engine.storage.name == "postgres" else 1
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


class _Occupied:
    """Every thread of the query path's pool held on a task until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        size = query.workers()._max_workers
        started = [threading.Event() for _ in range(size)]
        for event in started:
            query.workers().submit(self._hold, event)
        assert all(event.wait(timeout=30) for event in started)

    def _hold(self, started: threading.Event) -> None:
        started.set()
        self.release.wait(timeout=30)


def test_a_thread_runs_a_handed_task_itself_when_no_worker_has_started_it() -> None:
    ran_on: list[int] = []

    def task(value: str) -> str:
        ran_on.append(threading.get_ident())
        return value

    occupied = _Occupied()
    try:
        handed = query.hand(task, "answer")
        assert handed.result() == "answer"
        assert ran_on == [threading.get_ident()]
        assert handed.result() == "answer"  # asked again: the answer it had, not a second run
        assert ran_on == [threading.get_ident()]
    finally:
        occupied.release.set()
    # The queued copy was withdrawn: once every worker has taken a task queued after it (they
    # meet at the barrier, so none is still busy with anything taken before), nothing ran it.
    size = query.workers()._max_workers
    barrier = threading.Barrier(size, timeout=30)
    for done in [query.workers().submit(barrier.wait) for _ in range(size)]:
        done.result(timeout=30)
    assert ran_on == [threading.get_ident()]


def test_a_handed_task_that_fails_on_the_waiting_thread_raises_there() -> None:
    def task() -> None:
        raise ValueError("the task's own error")

    occupied = _Occupied()
    try:
        handed = query.hand(task)
        for _ in range(2):  # the same error each time it is asked
            with pytest.raises(ValueError, match="the task's own error"):
                handed.result()
    finally:
        occupied.release.set()


def test_a_handed_task_a_worker_has_started_is_waited_for_not_run_again() -> None:
    started, release = threading.Event(), threading.Event()
    ran_on: list[int] = []

    def task() -> int:
        ran_on.append(threading.get_ident())
        started.set()
        release.wait(timeout=30)
        return len(ran_on)

    handed = query.hand(task)
    assert started.wait(timeout=30)
    release.set()
    assert handed.result() == 1
    assert len(ran_on) == 1 and ran_on[0] != threading.get_ident()
