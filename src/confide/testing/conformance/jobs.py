"""Conformance: the background job queue (leases, completion, backoff, dedupe) and the worker.

Times are passed explicitly (``now``), so a lease's expiry is a matter of arithmetic, not
of waiting.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from confide.config import LLMPrice, Settings
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.llm.usage import UsageLedger
from confide.storage.apps import SqlAppTables
from confide.storage.base import Storage
from confide.storage.jobs import JobRow, JobState, JobTables, LeaseLostError, SqlJobTables
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter
from confide.workers import JobContext, Worker

T0 = 1_800_000_000.0


def _enqueue(storage: Storage, kind: str = "noop", **kw: Any) -> str:
    job_id = SqlJobTables(storage.database).enqueue(
        kind, account_id=kw.pop("account_id", ACCOUNT), payload={}, run_at=T0, now=T0, **kw
    )
    assert job_id is not None
    return job_id


def _job(queue: JobTables, job_id: str) -> JobRow:
    """The job ``job_id`` (it must exist)."""
    row = queue.get_job(job_id)
    assert row is not None, f"job {job_id} not found"
    return row


class JobQueueConformance(StorageHarness):
    """Claims are exclusive leases; only the current holder completes; failures back off."""

    def test_concurrent_claims_never_share_a_job(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        ids = {_enqueue(storage) for _ in range(24)}
        claimed: list[list[str]] = [[] for _ in range(4)]

        def claim_all(slot: int) -> None:
            while leases := queue.claim(f"w{slot}", lease_seconds=60, now=T0, limit=3):
                claimed[slot].extend(lease.job_id for lease in leases)

        threads = [threading.Thread(target=claim_all, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        every = [job for slot in claimed for job in slot]
        assert sorted(every) == sorted(ids)  # each job once, none lost
        assert all(j.state == JobState.RUNNING and j.attempts == 1 for j in queue.jobs())

    def test_only_due_jobs_of_the_asked_kinds_are_claimed(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        later = queue.enqueue("noop", account_id=None, payload={}, run_at=T0 + 60, now=T0)
        other = _enqueue(storage, kind="other")
        assert queue.claim("w", lease_seconds=60, now=T0, kinds=["noop"]) == []
        assert [x.job_id for x in queue.claim("w", lease_seconds=60, now=T0 + 61)] in (
            [other],
            [later],
        )

    def test_an_expired_lease_is_claimed_again_and_the_stale_holder_is_refused(
        self, engine: MemoryEngine
    ) -> None:
        queue = SqlJobTables(engine.storage.database)
        job_id = _enqueue(engine.storage)
        [first] = queue.claim("a", lease_seconds=10, now=T0)
        assert queue.claim("b", lease_seconds=10, now=T0 + 5) == []  # still held
        [second] = queue.claim("b", lease_seconds=10, now=T0 + 11)
        assert second.job_id == job_id and second.job.attempts == 2
        assert second.token != first.token
        assert not queue.renew(first, lease_seconds=10, now=T0 + 12)
        assert not queue.complete(first, T0 + 12)
        assert queue.retry(first, error="ProviderError", run_at=T0, now=T0 + 12) is None
        assert not queue.postpone(first, run_at=T0, now=T0 + 12)
        assert queue.renew(second, lease_seconds=10, now=T0 + 12)
        effect = engine.commit_batch(
            new=[{"account_id": ACCOUNT, "user_id": "user-1", "key": "done", "value": "once"}],
            within=lambda tx, _: queue.complete_job(tx, second, T0 + 13),
        )
        assert _job(queue, job_id).state == JobState.DONE
        assert queue.complete(second, T0 + 14)  # completing again is harmless
        # A finished job's lease holds nothing more: no renewal, retry or postponement.
        assert not queue.renew(second, lease_seconds=10, now=T0 + 15)
        assert queue.retry(second, error="ProviderError", run_at=T0, now=T0 + 15) is None
        assert not queue.postpone(second, run_at=T0, now=T0 + 15)
        assert _job(queue, job_id).state == JobState.DONE
        listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert [m.id for m in listed] == [effect[0].id]
        assert queue.claim("c", lease_seconds=10, now=T0 + 100) == []

    def test_a_completion_inside_a_refused_transaction_rolls_back_its_writes(
        self, engine: MemoryEngine
    ) -> None:
        queue = SqlJobTables(engine.storage.database)
        _enqueue(engine.storage)
        [stale] = queue.claim("a", lease_seconds=10, now=T0)
        queue.claim("b", lease_seconds=10, now=T0 + 11)
        with pytest.raises(LeaseLostError):
            engine.commit_batch(
                new=[{"account_id": ACCOUNT, "user_id": "user-1", "key": "k", "value": "v"}],
                within=lambda tx, _: queue.complete_job(tx, stale, T0 + 12),
            )
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []

    def test_retry_backs_off_then_gives_up(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        job_id = _enqueue(storage, max_attempts=2)
        [lease] = queue.claim("w", lease_seconds=60, now=T0)
        assert queue.retry(lease, error="ProviderError", run_at=T0 + 30, now=T0) == "queued"
        job = queue.get_job(job_id)
        assert job is not None and job.last_error == "ProviderError" and job.run_at == T0 + 30
        assert queue.claim("w", lease_seconds=60, now=T0 + 29) == []
        [again] = queue.claim("w", lease_seconds=60, now=T0 + 30)
        assert again.job.attempts == 2
        assert queue.retry(again, error="ProviderError", run_at=T0 + 90, now=T0 + 31) == "failed"
        assert queue.claim("w", lease_seconds=60, now=T0 + 1000) == []

    def test_a_job_whose_worker_keeps_dying_gives_up(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        job_id = _enqueue(storage, max_attempts=1)
        queue.claim("a", lease_seconds=10, now=T0)
        assert queue.claim("b", lease_seconds=10, now=T0 + 11) == []
        job = queue.get_job(job_id)
        assert job is not None and job.state == JobState.FAILED
        assert job.last_error == "LeaseExpired"

    def test_postponing_does_not_spend_an_attempt(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        job_id = _enqueue(storage, max_attempts=1)
        [lease] = queue.claim("w", lease_seconds=60, now=T0)
        assert queue.postpone(lease, run_at=T0 + 3600, now=T0)
        [again] = queue.claim("w", lease_seconds=60, now=T0 + 3600)
        assert again.job_id == job_id and again.job.attempts == 1

    def test_a_dedupe_key_enqueues_once(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        first = _enqueue(storage, dedupe_key="ttl:2027-01-15T08")
        again = queue.enqueue(
            "noop", account_id=None, payload={}, run_at=T0, now=T0, dedupe_key="ttl:2027-01-15T08"
        )
        assert again is None
        assert [j.id for j in queue.jobs()] == [first]

    def test_a_key_while_queued_dedupes_only_against_a_queued_job(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        key = "chat_summary:acct:conv-1"
        first = _enqueue(storage, dedupe_key=key, while_queued=True)
        burst = [
            queue.enqueue(
                "noop", account_id=ACCOUNT, payload={}, run_at=T0, now=T0, dedupe_key=key,
                while_queued=True,
            )
            for _ in range(3)
        ]  # fmt: skip
        assert burst == [None, None, None]
        [lease] = queue.claim("w", lease_seconds=60, now=T0)
        assert lease.job_id == first
        # It may have read its data before the next write: that write queues another.
        second = _enqueue(storage, dedupe_key=key, while_queued=True)
        assert second != first
        assert queue.complete(lease, T0 + 1)
        done = queue.get_job(first)
        assert done is not None and done.state == JobState.DONE
        assert queue.enqueue(
            "noop", account_id=ACCOUNT, payload={}, run_at=T0, now=T0, dedupe_key=key,
            while_queued=True,
        ) is None  # fmt: skip
        [queued] = queue.jobs(state=JobState.QUEUED)
        assert queued.id == second and queued.dedupe_key == key

    def test_payloads_hold_ids_never_content(self, storage: Storage) -> None:
        queue = SqlJobTables(storage.database)
        for payload in ({"text": "x" * 300}, {"nested": {"a": 1}}, {"items": ["a"]}):
            with pytest.raises(ValidationError):
                queue.enqueue("noop", account_id=None, payload=payload, run_at=T0, now=T0)
        assert queue.jobs() == []
        _enqueue(storage)
        queue.prune_jobs(T0 + 1)
        assert len(queue.jobs()) == 1  # only finished jobs are pruned


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _worker(engine: MemoryEngine, clock: _Clock, **settings: Any) -> Worker:
    options = {"worker_backoff_seconds": 30.0, "worker_max_attempts": 3, **settings}
    return Worker(engine, Settings(home=engine.settings.home, **options), clock=clock)


class WorkerConformance(StorageHarness):
    """The worker: effects commit with completion; a failing handler leaves data as it was."""

    def test_a_failing_handler_leaves_data_and_is_retried_with_backoff(
        self, engine: MemoryEngine
    ) -> None:
        clock = _Clock()
        memory = add(engine, key="walks", value="walks 2 miles")
        calls: list[int] = []

        def flaky(ctx: JobContext) -> None:
            calls.append(ctx.job.attempts)

            def write_then_fail(tx: Any, _: Any) -> None:
                ctx.complete_within(tx)
                if len(calls) < 3:
                    raise ConnectionError("the model did not answer")

            engine.commit_batch(
                revisions=[(engine.get(memory.id, account_id=ACCOUNT), {"value": "walks 3"})],
                within=write_then_fail,
            )

        worker = _worker(engine, clock)
        worker.register("merge", flaky, uses_llm=True)
        job_id = worker.queue.enqueue(
            "merge",
            account_id=ACCOUNT,
            payload={"memory_id": memory.id},
            run_at=clock(),
            now=clock(),
        )
        assert job_id is not None
        report = worker.run_once()
        assert (report.ran, report.retried) == (1, 1)
        assert engine.get(memory.id, account_id=ACCOUNT).value == "walks 2 miles"
        job = worker.queue.get_job(job_id)
        assert job is not None and job.state == JobState.QUEUED
        assert job.last_error == "ConnectionError" and job.run_at == clock.now + 30
        assert worker.run_once().ran == 0  # not due yet
        clock.now += 30
        assert worker.run_once().retried == 1
        assert _job(worker.queue, job_id).run_at == clock.now + 60
        clock.now += 60
        assert worker.run_once().done == 1
        assert calls == [1, 2, 3]
        head = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert [(m.lineage_id, m.value, m.version) for m in head] == [(memory.id, "walks 3", 2)]

    def test_a_handler_past_its_runtime_is_given_up_and_its_completion_refused(
        self, engine: MemoryEngine
    ) -> None:
        clock = _Clock()
        gate, finished = threading.Event(), threading.Event()
        outcome: list[str] = []

        def slow(ctx: JobContext) -> None:
            while not ctx.should_stop():
                gate.wait(0.01)
            try:
                engine.commit_batch(
                    new=[{"account_id": ACCOUNT, "user_id": "user-1", "key": "late", "value": "x"}],
                    within=lambda tx, _: ctx.complete_within(tx),
                )
                outcome.append("committed")
            except LeaseLostError:
                outcome.append("refused")
            finally:
                finished.set()

        worker = _worker(engine, clock, worker_job_timeout=0.2, worker_lease_seconds=0.3)
        worker.register("slow", slow)
        job_id = worker.queue.enqueue(
            "slow", account_id=None, payload={}, run_at=clock(), now=clock()
        )
        assert worker.run_once().retried == 1
        assert finished.wait(10) and outcome == ["refused"]
        job = worker.queue.get_job(job_id or "")
        assert job is not None and job.last_error == "JobTimeout" and job.state == JobState.QUEUED
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []

    def test_an_account_over_its_budget_waits_without_spending_attempts(
        self, engine: MemoryEngine
    ) -> None:
        clock = _Clock()
        ledger = UsageLedger(
            SqlAppTables(engine.storage),
            prices={"*": LLMPrice(per_call=9.0)},
            budget_units=10.0,
            clock=clock,
        )
        ran: list[str] = []
        worker = _worker(engine, clock)
        worker.usage = ledger
        worker.register("insights", lambda ctx: ran.append(ctx.job.kind), uses_llm=True)
        worker.register("ttl", lambda ctx: ran.append(ctx.job.kind))
        for kind in ("insights", "ttl"):
            worker.queue.enqueue(kind, account_id=ACCOUNT, payload={}, run_at=clock(), now=clock())
        assert worker.run_once().done == 2  # under budget: both run
        for kind in ("insights", "ttl"):
            worker.queue.enqueue(kind, account_id=ACCOUNT, payload={}, run_at=clock(), now=clock())
        ledger.record(
            account_id=ACCOUNT, operation="x", scope=None, prompt_tokens=0, completion_tokens=0
        )  # 9 of 10 units spent: under the 20% left that background work needs
        report = worker.run_once()
        assert (report.done, report.deferred) == (1, 1)
        assert sorted(ran) == ["insights", "ttl", "ttl"]
        waiting = [j for j in worker.queue.jobs(kind="insights") if j.state == JobState.QUEUED]
        assert [(j.attempts, j.run_at) for j in waiting] == [(0, ledger.day_start() + 86_400)]
