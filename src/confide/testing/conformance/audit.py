"""Conformance: change log, revisions, delta header, operational events, purges."""

from __future__ import annotations

import threading
import time

import pytest

from confide.engine import MemoryEngine, default_thread
from confide.errors import NotFoundError
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter, MemoryState, OpEvent

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
        def delta(rev: int) -> str:
            return engine.delta_since(THREAD, rev, account_id=ACCOUNT, user_id="user-1")

        assert delta(0) == ""
        a = add(engine, key="preferred_name", value="Ana", category="personal")
        add(engine, key="b", value="Walks two miles every morning.", importance=4)
        c = add(engine, key="hobby", value="chess")
        engine.update(a.id, {"value": "Anna"}, account_id=ACCOUNT)
        engine.forget(c.id, account_id=ACCOUNT)
        assert delta(1).splitlines() == [
            "Memory updates since rev 1:",
            "- −deleted: [Fact] hobby (imp=2)",  # a forgotten value is named by its key
            "- ↑updated: [Personal] Preferred name is Anna (imp=2)",
            "- +created: [Fact] Walks two miles every morning. (imp=4)",
        ]
        # Created and revised since the reader looked: one bullet, news of a new memory.
        assert delta(0).splitlines()[2] == "- +created: [Personal] Preferred name is Anna (imp=2)"
        assert len(delta(0).splitlines()) == 4  # five changes, three memories, three bullets
        engine.restore(c.id, account_id=ACCOUNT)
        assert delta(5) == "Memory updates since rev 5:\n- ⤺restored: [Fact] Hobby is chess (imp=2)"
        assert delta(6) == ""

    def test_delta_header_shows_only_the_readers_own_memories(self, engine: MemoryEngine) -> None:
        add(engine, key="diagnosis", value="Private to user two", user_id="user-2", thread_id="t")
        add(engine, key="other", value="In another account", account_id="acct-2", thread_id="t")
        add(engine, key="mine", value="Mine", thread_id="t")
        add(engine, key="plan", value="Visit Rome", category="travel", thread_id="t")
        header = engine.delta_since("t", 0, account_id=ACCOUNT, user_id="user-1")
        assert "Private" not in header and "another account" not in header
        assert header.splitlines()[1:] == [
            "- +created: [Travel] Plan is Visit Rome (imp=2)",
            "- +created: [Fact] Mine (imp=2)",
        ]
        only_travel = engine.delta_since(
            "t", 0, account_id=ACCOUNT, user_id="user-1", categories=("travel",)
        )
        assert only_travel.splitlines()[1:] == ["- +created: [Travel] Plan is Visit Rome (imp=2)"]
        assert engine.delta_since("t", 0, account_id=ACCOUNT, user_id="user-3") == ""

    def test_a_delivered_header_shows_each_change_once(self, engine: MemoryEngine) -> None:
        def deliver(reader: str = "default") -> str:
            return engine.deliver_delta(account_id=ACCOUNT, user_id="user-1", reader=reader)

        assert deliver() == ""
        memory = add(engine, key="preferred_name", value="Ana")
        assert deliver() == (
            "Memory updates since rev 0:\n- +created: [Fact] Preferred name is Ana (imp=2)"
        )
        assert deliver() == ""  # seen
        engine.update(memory.id, {"value": "Anna"}, account_id=ACCOUNT)
        assert deliver() == (
            "Memory updates since rev 1:\n- ↑updated: [Fact] Preferred name is Anna (imp=2)"
        )
        assert deliver() == ""
        # Another agent has seen nothing yet: it gets the changes once, too.
        assert deliver("nurse").splitlines()[0] == "Memory updates since rev 0:"
        assert deliver("nurse") == ""
        engine.forget(memory.id, account_id=ACCOUNT)
        purged = engine.purge_expired(now=time.time() + 31 * 86400)
        assert purged.purged == 2
        assert deliver() == "Memory updates since rev 2:\n- −deleted: [Fact] (removed)"

    def test_racing_deliveries_show_a_change_exactly_once(self, engine: MemoryEngine) -> None:
        for i in range(5):
            add(engine, key=f"k{i}", value=f"value {i}")
        barrier = threading.Barrier(4)
        headers: list[str] = []

        def reader() -> None:
            barrier.wait()
            headers.append(
                engine.deliver_delta(account_id=ACCOUNT, user_id="user-1", reader="default")
            )

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(h != "" for h in headers) == [False, False, False, True]

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

    def test_emitted_events_are_counted_per_account(self, engine: MemoryEngine) -> None:
        started = time.time()
        engine.emit_op("hotpath", "create", account_id=ACCOUNT, user_id="user-1", memory_id="m")
        engine.emit_op("hotpath", "search", account_id=ACCOUNT, user_id="user-1", sim=0.8)
        engine.emit_op("worker", "ttl", account_id=ACCOUNT, memory_id="m")
        engine.emit_op("hotpath", "create", account_id="acct-2", user_id="user-9")
        # Queued, not yet written: counting writes this process's queue first.
        assert engine.op_counts(by="op", account_id=ACCOUNT, since=started) == {
            "create": 1,
            "search": 1,
            "ttl": 1,
        }
        assert engine.op_counts(by="node", account_id=ACCOUNT) == {"hotpath": 2, "worker": 1}
        assert engine.op_counts(by="node", account_id="acct-2") == {"hotpath": 1}
        assert engine.op_counts(by="op", account_id="acct-3") == {}

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
