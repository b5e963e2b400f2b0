"""Conformance: change log, revisions, delta header, operational events, purges."""

from __future__ import annotations

import threading
import time

import pytest

from engram.engine import MemoryEngine, default_thread
from engram.errors import NotFoundError
from engram.testing.builders import ACCOUNT, add
from engram.testing.conformance.harness import StorageHarness
from engram.types import MemoryFilter, MemoryState, OpEvent

THREAD = default_thread(ACCOUNT, "user-1")


class AuditConformance(StorageHarness):
    """Change log, revisions, delta header, operational events and purges."""

    def test_revisions_increase_by_one_per_write(self, engine: MemoryEngine) -> None:
        assert engine.current_rev(THREAD) == 0
        memory = add(engine)
        assert engine.current_rev(THREAD) == 1
        engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        engine.forget(memory.id, account_id=ACCOUNT)
        engine.restore(memory.id, account_id=ACCOUNT)
        assert engine.current_rev(THREAD) == 4
        assert [c.rev for c in engine.changes_since(THREAD, 0)] == [4, 3, 2, 1]
        add(engine, key="other", thread_id="custom-thread")
        assert engine.current_rev("custom-thread") == 1
        assert engine.current_rev(THREAD) == 4

    def test_delta_header_lists_at_most_three_newest(self, engine: MemoryEngine) -> None:
        assert engine.delta_since(THREAD, 0) == ""
        a = add(engine, key="a")
        add(engine, key="b")
        engine.update(a.id, {"value": "new"}, account_id=ACCOUNT)
        engine.forget(a.id, account_id=ACCOUNT)
        engine.restore(a.id, account_id=ACCOUNT)
        header = engine.delta_since(THREAD, 1)
        assert header.splitlines() == [
            "Memory updates since rev 1:",
            "- ⤺restored a",
            "- −deleted a",
            "- ↑updated a",
        ]
        assert engine.delta_since(THREAD, 4) == "Memory updates since rev 4:\n- ⤺restored a"
        assert engine.delta_since(THREAD, 5) == ""
        # Five changes since rev 0, but the header shows only the three newest.
        assert engine.delta_since(THREAD, 0).splitlines()[1:] == header.splitlines()[1:]

    def test_concurrent_writers_get_consecutive_revisions(self, engine: MemoryEngine) -> None:
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for i in range(10):
                    add(engine, key=f"w{n}_{i}")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        revs = sorted(c.rev for c in engine.changes_since(THREAD, 0, limit=100))
        assert revs == list(range(1, 41))

    def test_operational_events_are_counted(self, engine: MemoryEngine) -> None:
        for op in ("store", "store", "query"):
            engine.record_op(OpEvent(user_id="user-1", node="tools", op=op), account_id=ACCOUNT)
        engine.record_op(OpEvent(node="worker", op="compact", status="error"))
        assert engine.op_counts(by="op") == {"store": 2, "query": 1, "compact": 1}
        assert engine.op_counts(by="node") == {"tools": 3, "worker": 1}
        assert engine.op_counts(by="op", since=time.time() + 60) == {}

    def test_purge_expired_removes_all_versions(self, engine: MemoryEngine) -> None:
        memory = add(engine)
        second = engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        keep = add(engine, key="keep")
        engine.forget(second.id, account_id=ACCOUNT)
        assert engine.purge_expired().purged == 0  # retention not over yet
        report = engine.purge_expired(now=time.time() + 31 * 86400)
        assert report.purged == 2
        tombstone = engine.get(second.id, account_id=ACCOUNT)
        assert tombstone.state is MemoryState.PURGED and tombstone.value == ""
        with pytest.raises(NotFoundError):
            engine.get(memory.id, account_id=ACCOUNT)
        assert engine.get(keep.id, account_id=ACCOUNT).state is MemoryState.ACTIVE
        assert engine.history(second.id, account_id=ACCOUNT)[0].event.value == "PURGE"

    def test_admin_purge_of_scope_reports_count(self, engine: MemoryEngine) -> None:
        add(engine, key="a", agent_id="bot")
        b = add(engine, key="b", agent_id="bot")
        engine.update(b.id, {"value": "v2"}, account_id=ACCOUNT)
        survivor = add(engine, key="c", agent_id="other")
        add(engine, key="d", user_id="user-2", agent_id="bot")
        report = engine.purge_scope(account_id=ACCOUNT, user_id="user-1", agent_id="bot")
        assert report.purged == 3
        left = engine.list_memories(MemoryFilter(account_id=ACCOUNT))
        assert {m.key for m in left} == {"c", "d"} and survivor.id in {m.id for m in left}
