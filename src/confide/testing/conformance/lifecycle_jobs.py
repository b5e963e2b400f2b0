"""Conformance: the TTL job retires idle and expired memories; the purge job removes them.

Idleness is made by moving a memory's ``updated_at`` back in the store (as if written long
ago), never by waiting.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine, default_thread
from confide.errors import ConflictError
from confide.storage.jobs import JobState, SqlJobTables
from confide.testing.builders import ACCOUNT, add
from confide.testing.clock import before_consolidation
from confide.testing.conformance.harness import StorageHarness
from confide.testing.embedders import HashingEmbedder
from confide.types import HistoryEventType, MemoryFilter, MemoryState
from confide.workers import standard_worker

DAY = 86_400.0
THREAD = default_thread(ACCOUNT, "user-1")
ACTIVE = MemoryFilter(account_id=ACCOUNT, user_id="user-1")


def _age(
    engine: MemoryEngine, memory_id: str, days: float, *, read_days: float | None = None
) -> None:
    """Make a memory look last changed ``days`` ago (and last read ``read_days`` ago)."""
    fields = {"updated_at": time.time() - days * DAY}
    if read_days is not None:
        fields["last_accessed_at"] = time.time() - read_days * DAY
    with engine.storage.transaction() as tx:
        tx.update_memory(memory_id, fields)


def _states(engine: MemoryEngine, *ids: str) -> list[str]:
    return [engine.get(i, account_id=ACCOUNT).state.value for i in ids]


def _before_consolidation() -> float:
    """A moment of today (UTC) at which a worker enqueues the hourly schedules only."""
    return before_consolidation(ACCOUNT, time.time())


class LifecycleJobsConformance(StorageHarness):
    """TTL retirement (idle, low importance, unpinned; or expired) and purge."""

    def test_ttl_retires_idle_unimportant_and_expired_memories_only(
        self, engine: MemoryEngine, settings: Settings
    ) -> None:
        idle = add(engine, key="snack", value="likes pretzels", importance=2)
        important = add(engine, key="allergy", value="allergic to nuts", importance=3)
        pinned = add(engine, key="name", value="Ana", importance=1, pinned=True)
        fresh = add(engine, key="mood", value="tired today", importance=1)
        recently_read = add(engine, key="tea", value="green tea", importance=1)
        moment = _before_consolidation()
        past = datetime.fromtimestamp(moment, UTC) - timedelta(hours=1)
        expired = add(engine, key="trip", value="in Rome this week", importance=5, expires_at=past)
        for memory in (idle, important, pinned, recently_read):
            _age(engine, memory.id, 61)
        _age(engine, recently_read.id, 61, read_days=2)
        rev = engine.current_rev(THREAD)

        report = standard_worker(engine, settings, clock=lambda: moment).run_once()

        assert report.done == 3 and report.kinds == {"ttl": 1, "purge": 1, "app_resume": 1}
        assert _states(engine, idle.id, expired.id) == ["soft_deleted", "soft_deleted"]
        kept = (important.id, pinned.id, fresh.id, recently_read.id)
        assert _states(engine, *kept) == ["active"] * 4
        assert {m.id for m in engine.list_memories(ACTIVE)} == set(kept)
        retired = engine.get(idle.id, account_id=ACCOUNT)
        assert retired.purge_at is not None
        assert retired.purge_at.timestamp() == pytest.approx(moment + 30 * DAY, abs=1)
        assert engine.history(idle.id, account_id=ACCOUNT)[0].event == HistoryEventType.TTL
        changes = engine.changes_since(THREAD, rev)
        assert sorted((c.event, c.meta["key"]) for c in changes) == [
            (HistoryEventType.TTL, "snack"),
            (HistoryEventType.TTL, "trip"),
        ]
        delta = engine.delta_since(THREAD, rev, account_id=ACCOUNT, user_id="user-1")
        header = delta.splitlines()
        assert header[0] == f"Memory updates since rev {rev}:"
        bullets = sorted(header[1:])
        assert len(bullets) == 2 and all(b.startswith("- ⌛expired: [") for b in bullets)
        # Retired memories are named by their keys, their values out of every answer.
        assert [b.split("] ", 1)[1] for b in bullets] == ["snack (imp=2)", "trip (imp=5)"]
        current = engine.current_rev(THREAD)
        assert engine.delta_since(THREAD, current, account_id=ACCOUNT, user_id="user-1") == ""
        assert engine.op_counts(by="op").get("ttl") == 2
        # The same hour's schedule is enqueued once: a second run does nothing.
        assert standard_worker(engine, settings, clock=lambda: moment).run_once().ran == 0

    def test_ttl_runs_are_idempotent_and_restore_holds(self, engine: MemoryEngine) -> None:
        idle = add(engine, key="snack", value="likes pretzels", importance=1)
        past = datetime.now(UTC) - timedelta(minutes=5)
        expired = add(engine, key="trip", value="in Rome", expires_at=past)
        _age(engine, idle.id, 90)
        assert engine.expire_idle(idle_days=60, importance_below=3) == 2
        assert engine.expire_idle(idle_days=60, importance_below=3) == 0
        events = [e.event for e in engine.history(idle.id, account_id=ACCOUNT)]
        assert events.count(HistoryEventType.TTL) == 1
        for memory in (idle, expired):
            restored = engine.restore(memory.id, account_id=ACCOUNT)
            assert restored.state == MemoryState.ACTIVE and restored.purge_at is None
        assert engine.get(expired.id, account_id=ACCOUNT).expires_at is None
        assert engine.expire_idle(idle_days=60, importance_below=3) == 0
        assert {m.id for m in engine.list_memories(ACTIVE)} == {idle.id, expired.id}

    def test_purge_removes_every_derived_row_past_purge_at(
        self, engine: MemoryEngine, settings: Settings
    ) -> None:
        linked = settings.model_copy(update={"link_min": -1.0})  # every neighbour is linked
        app = Confide(engine, embedder=HashingEmbedder(), settings=linked)
        gone = add(app.engine, key="snack", value="likes salted pretzels", importance=1)
        gone = app.engine.update(gone.id, {"value": "likes sweet pretzels"}, account_id=ACCOUNT)
        neighbour = add(app.engine, key="treat", value="likes pretzels with mustard")
        # The same memory alone in another user's scope: what user-1 keeps once purged.
        control = add(app.engine, key="treat", value="likes pretzels with mustard", user_id="u-2")
        storage = engine.storage
        versions = [v.id for v in engine.versions(gone.id, account_id=ACCOUNT)]
        assert len(versions) == 2
        assert storage.edges(ACCOUNT, [gone.id]) and storage.vectors(ACCOUNT, [gone.id])
        _age(engine, gone.id, 61)
        assert engine.expire_idle(idle_days=60, importance_below=3) == 1

        assert engine.purge_expired(now=time.time() + 29 * DAY).purged == 0  # restorable
        assert engine.restore(gone.id, account_id=ACCOUNT).state == MemoryState.ACTIVE
        engine.forget(gone.id, account_id=ACCOUNT)
        assert engine.purge_expired(now=time.time() + 31 * DAY).purged == 2

        assert storage.get_memories(ACCOUNT, versions[:1]) == []
        [tombstone] = storage.get_memories(ACCOUNT, versions[1:])
        assert tombstone.state == MemoryState.PURGED.value and tombstone.ciphertext == b""
        assert storage.edges(ACCOUNT, versions) == []
        for table in ("memory_tokens", "embeddings", "relations"):
            assert storage.count_rows(table, ACCOUNT, "user-1") == storage.count_rows(
                table, ACCOUNT, "u-2"
            ), table
        with pytest.raises(ConflictError):
            engine.restore(gone.id, account_id=ACCOUNT)
        assert storage.vectors(ACCOUNT, [neighbour.id, control.id]).keys() == {
            neighbour.id,
            control.id,
        }
        assert [m.id for m in engine.list_memories(ACTIVE)] == [neighbour.id]

    def test_the_purge_job_prunes_finished_jobs(
        self, engine: MemoryEngine, settings: Settings
    ) -> None:
        queue = SqlJobTables(engine.storage.database)
        moment = _before_consolidation()
        old = moment - 8 * DAY
        job_id = queue.enqueue("noop", account_id=None, payload={}, run_at=old, now=old)
        [lease] = queue.claim("w", lease_seconds=60, now=old)
        assert queue.complete(lease, old)
        standard_worker(engine, settings, clock=lambda: moment).run_once()
        assert queue.get_job(job_id or "") is None
        done = {j.kind for j in queue.jobs(state=JobState.DONE)}
        assert done == {"ttl", "purge", "app_resume"}  # the schedules' runs, not the old job
