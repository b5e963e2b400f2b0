"""The engine's long jobs tell a :data:`confide.types.Progress` how far they have got: first
``(0, total)``, then after each step, ending at ``(total, total)``; the worker's total is not
known. On both backends."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.engine.reindex import reindex
from confide.types import MemoryFilter, MemoryState
from confide.workers.worker import RunReport, Worker

ACCOUNT = "acct-p"


class Told:
    """A Progress that keeps what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int | None]] = []

    def __call__(self, done: int, total: int | None) -> None:
        self.calls.append((done, total))

    def check(self, total: int) -> None:
        """From 0 to ``total`` of ``total``, never backwards."""
        assert self.calls[0] == (0, total) and self.calls[-1] == (total, total)
        done = [d for d, _ in self.calls]
        assert done == sorted(done) and {t for _, t in self.calls} == {total}


def _fill(engine: MemoryEngine, user: str, count: int) -> None:
    for n in range(count):
        engine.store(
            {"account_id": ACCOUNT, "user_id": user, "key": f"k{n}", "value": f"Value {n}."}
        )


def test_export_and_import_tell_the_versions_done(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("confide.engine.portability._STEP", 2)
    _fill(engine, "ana", 5)
    exported = Told()
    document = engine.export_user(account_id=ACCOUNT, user_id="ana", progress=exported)
    exported.check(5)
    assert [d for d, _ in exported.calls] == [0, 2, 4, 5]
    imported = Told()
    report = engine.import_user(document, user_id="ana-copy", progress=imported)
    assert report.imported == 5
    imported.check(5)
    # One transaction: the import is told before and after it.
    assert [d for d, _ in imported.calls] == [0, 5]
    copies = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="ana-copy"))
    assert len(copies) == 5
    again = Told()
    assert engine.import_user(document, user_id="ana-copy", progress=again).skipped == 5
    assert again.calls == [(0, 0), (0, 0)]


def test_erasure_tells_its_four_steps(engine: MemoryEngine) -> None:
    _fill(engine, "bo", 2)
    told = Told()
    receipt = engine.erase_user(account_id=ACCOUNT, user_id="bo", progress=told)
    assert receipt.deleted["memories"] == 2
    assert told.calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    everything = MemoryFilter(account_id=ACCOUNT, user_id="bo", states=tuple(MemoryState))
    assert engine.list_memories(everything) == []


def test_reindex_tells_the_live_versions_done(engine: MemoryEngine) -> None:
    _fill(engine, "cy", 5)
    told = Told()
    assert reindex(engine, None, batch_size=2, progress=told) == 5
    told.check(5)
    assert [d for d, _ in told.calls] == [0, 2, 4, 5]


def _worker_with_jobs(engine: MemoryEngine, settings: Settings, count: int) -> Worker:
    worker = Worker(engine, settings, clock=lambda: 1_000.0)
    worker.register("noted", lambda ctx: None)
    for n in range(count):
        worker.queue.enqueue("noted", account_id=ACCOUNT, payload={"n": n}, run_at=0, now=0)
    return worker


def test_a_worker_run_tells_each_job_it_ran(engine: MemoryEngine, settings: Settings) -> None:
    worker = _worker_with_jobs(engine, settings, 3)
    told = Told()
    assert worker.run_once(progress=told).done == 3
    assert told.calls == [(1, None), (2, None), (3, None)]


def test_a_running_worker_counts_jobs_since_it_started(
    engine: MemoryEngine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _worker_with_jobs(engine, settings, 2)
    one_pass = worker.run_once
    passes: list[int] = []

    def run_once(**options: Any) -> RunReport:
        report = one_pass(**options)
        passes.append(report.ran)
        if len(passes) == 1:  # a job for the next pass
            worker.queue.enqueue("noted", account_id=ACCOUNT, payload={}, run_at=0, now=0)
        return report

    monkeypatch.setattr(worker, "run_once", run_once)
    stop = threading.Event()
    told = Told()

    def until_three(done: int, total: int | None) -> None:
        told(done, total)
        if done == 3:
            stop.set()

    worker.run_forever(stop, progress=until_three)
    assert passes == [2, 1]
    assert told.calls == [(1, None), (2, None), (3, None)]
