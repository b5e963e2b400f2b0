"""Conformance: writers racing on one memory never undo each other's acknowledged changes.

Forget, restore and visibility change a memory's current version in place; an update
supersedes it. Every write is a compare-and-set on the version's id and row version, so a
writer that read the memory before another writer changed it loses with ConflictError.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager

import pytest

from confide.engine import MemoryEngine
from confide.errors import ConflictError, PreconditionFailedError
from confide.storage.base import Transaction
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import HistoryEventType, Memory, MemoryFilter, MemoryState, Visibility

CHANGED = "changed concurrently"


def before_next_write(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch, other: Callable[[], object]
) -> None:
    """Let ``other`` commit just before the engine's next write transaction opens.

    An engine call reads first and writes last; this puts another caller's complete
    operation between the two, the interleaving that lost acknowledged forgets.
    """
    original = engine.storage.transaction
    pending = [other]

    def transaction() -> AbstractContextManager[Transaction]:
        if pending:
            pending.pop()()  # runs through the original: the list is empty now
        return original()

    monkeypatch.setattr(engine.storage, "transaction", transaction)


def _events(engine: MemoryEngine, memory: Memory) -> list[HistoryEventType]:
    return [e.event for e in engine.history(memory.id, account_id=ACCOUNT)]


# ---- many writers at once ------------------------------------------------------------------

THREADS = 8
OPS_PER_THREAD = 48
UPDATE_ATTEMPTS = 5
# A long value takes a while to tokenize and seal between an update's read and its write,
# so other writers land in that window as often as they would behind a slow client.
FILLER = " ".join(f"word{i}" for i in range(400))
# Each thread draws from its own mix, so the slower updates are not starved by a stream of
# quick in-place changes. Threads without updates stop halfway; an update, slower from read
# to write, may lose every race while they run, and must then get through: only they forget,
# so a restore revives the memory for good after they stop.
MIXES = (
    ("update",),
    ("update",),
    ("update",),
    ("forget", "restore"),
    ("forget", "restore"),
    ("restore", "update"),
    ("private", "shared"),
    ("private", "shared", "restore", "update"),
)
EVENT_OF = {
    "update": HistoryEventType.UPDATE,
    "forget": HistoryEventType.DELETE,
    "restore": HistoryEventType.RESTORE,
    "private": HistoryEventType.PRIVACY,
    "shared": HistoryEventType.PRIVACY,
}


def _hammer(engine: MemoryEngine, memory: Memory) -> list[tuple[str, Memory]]:
    """Run random operations on ``memory`` from many threads; the acknowledged ones."""
    start = threading.Barrier(THREADS)

    def call(op: str, label: str) -> Memory:
        if op == "update":
            # As a client told to read and retry does (a forgotten memory is not retried).
            for _ in range(UPDATE_ATTEMPTS - 1):
                try:
                    return engine.update(memory.id, {"value": label}, account_id=ACCOUNT)
                except ConflictError as exc:
                    if CHANGED not in str(exc):
                        raise
            return engine.update(memory.id, {"value": label}, account_id=ACCOUNT)
        if op == "forget":
            return engine.forget(memory.id, account_id=ACCOUNT)
        if op == "restore":
            return engine.restore(memory.id, account_id=ACCOUNT)
        if op == "private":
            return engine.mark_private(memory.id, account_id=ACCOUNT)
        return engine.mark_shared(memory.id, account_id=ACCOUNT)

    def worker(n: int) -> list[tuple[str, Memory]]:
        rng = random.Random(n)
        acked = []
        start.wait(timeout=60)
        ops = OPS_PER_THREAD if "update" in MIXES[n] else OPS_PER_THREAD // 2
        for i in range(ops):
            op = rng.choice(MIXES[n])
            # A refused operation is not acknowledged: it must leave no trace.
            with contextlib.suppress(ConflictError):
                acked.append((op, call(op, f"value {n}.{i} {FILLER}")))
        return acked

    # Switch threads far more often than every 5 ms, so that operations interleave at many
    # points instead of each thread running a batch of them alone.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            done = pool.map(worker, range(THREADS), timeout=120)
            return [ack for acks in done for ack in acks]
    finally:
        sys.setswitchinterval(interval)


class ConcurrentWritesConformance(StorageHarness):
    """Racing writers never undo each other's acknowledged changes."""

    def test_update_that_read_before_a_forget_loses(
        self, engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        memory = add(engine)
        before_next_write(engine, monkeypatch, lambda: engine.forget(memory.id, account_id=ACCOUNT))
        with pytest.raises(ConflictError, match=CHANGED):
            engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        versions = engine.versions(memory.id, account_id=ACCOUNT)
        assert [(v.id, v.state, v.value) for v in versions] == [
            (memory.id, MemoryState.SOFT_DELETED, "blue")
        ]
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT)) == []
        assert _events(engine, memory) == [HistoryEventType.DELETE, HistoryEventType.ADD]

    def test_update_that_read_before_mark_private_loses(
        self, engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        memory = add(engine, visibility="shared")
        before_next_write(
            engine, monkeypatch, lambda: engine.mark_private(memory.id, account_id=ACCOUNT)
        )
        with pytest.raises(ConflictError, match=CHANGED):
            engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        head = engine.get(memory.id, account_id=ACCOUNT)
        assert (head.state, head.visibility, head.value) == (
            MemoryState.ACTIVE,
            Visibility.PRIVATE,
            "blue",
        )
        shared = MemoryFilter(account_id=ACCOUNT, visibility=Visibility.SHARED)
        assert engine.list_memories(shared) == []
        # Read again and retry: the new version keeps the visibility.
        retried = engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        assert (retried.version, retried.visibility) == (2, Visibility.PRIVATE)

    def test_forget_and_restore_in_between_still_fail_the_update(
        self, engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The state is back where the update read it; the row version tells it happened.
        memory = add(engine)

        def forget_and_restore() -> None:
            engine.forget(memory.id, account_id=ACCOUNT)
            engine.restore(memory.id, account_id=ACCOUNT)

        before_next_write(engine, monkeypatch, forget_and_restore)
        with pytest.raises(ConflictError, match=CHANGED):
            engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        assert [v.id for v in engine.versions(memory.id, account_id=ACCOUNT)] == [memory.id]

    def test_row_version_counts_in_place_changes(self, engine: MemoryEngine) -> None:
        memory = add(engine)
        assert memory.row_version == 1
        assert engine.forget(memory.id, account_id=ACCOUNT).row_version == 2
        assert engine.restore(memory.id, account_id=ACCOUNT).row_version == 3
        assert engine.mark_shared(memory.id, account_id=ACCOUNT).row_version == 4
        assert engine.get(memory.id, account_id=ACCOUNT).row_version == 4
        second = engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT)
        assert (second.version, second.row_version) == (2, 1)
        assert engine.get(second.id, account_id=ACCOUNT).row_version == 1
        # Being superseded is an in-place change of the older version too.
        assert engine.get(memory.id, account_id=ACCOUNT).row_version == 5

    def test_update_with_expected_row_version(self, engine: MemoryEngine) -> None:
        memory = add(engine)
        engine.mark_shared(memory.id, account_id=ACCOUNT)
        with pytest.raises(PreconditionFailedError, match="row version 1"):
            engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT, expected_row_version=1)
        assert len(engine.versions(memory.id, account_id=ACCOUNT)) == 1
        second = engine.update(
            memory.id, {"value": "green"}, account_id=ACCOUNT, expected_row_version=2
        )
        # The superseded version, even at its current row version, is not what an update acts on.
        superseded = engine.get(memory.id, account_id=ACCOUNT)
        with pytest.raises(PreconditionFailedError):
            engine.update(
                memory.id,
                {"value": "red"},
                account_id=ACCOUNT,
                expected_row_version=superseded.row_version,
            )
        third = engine.update(
            second.id, {"value": "red"}, account_id=ACCOUNT, expected_row_version=second.row_version
        )
        assert (third.version, third.value) == (3, "red")

    def test_expected_row_version_also_guards_the_write(
        self, engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Right when read, stale when written: still a failed precondition, nothing written.
        memory = add(engine)
        before_next_write(engine, monkeypatch, lambda: engine.forget(memory.id, account_id=ACCOUNT))
        with pytest.raises(PreconditionFailedError, match=CHANGED):
            engine.update(memory.id, {"value": "green"}, account_id=ACCOUNT, expected_row_version=1)
        assert engine.get(memory.id, account_id=ACCOUNT).state is MemoryState.SOFT_DELETED

    def test_concurrent_transitions_replay_from_history(self, engine: MemoryEngine) -> None:
        # The interleaving differs from run to run; what is checked holds for every one of them.
        memory = add(engine, visibility="shared")
        acked = _hammer(engine, memory)

        # Replay the history in commit order. Each transition must apply to the version that
        # was current then, in the state it requires; row versions are counted alongside.
        history = list(reversed(engine.history(memory.id, account_id=ACCOUNT)))
        assert history[0].event is HistoryEventType.ADD
        head, state = memory.id, MemoryState.ACTIVE
        visibility = {memory.id: Visibility.SHARED}
        row_version = {memory.id: 1}
        replayed: list[tuple[HistoryEventType, str, int]] = []
        for n, e in enumerate(history[1:], 1):
            where = f"event {n} ({e.event.value})"
            if e.event is HistoryEventType.UPDATE:
                assert e.old_ref == head, f"{where} superseded a version that was not current"
                assert state is MemoryState.ACTIVE, f"{where} undid a forget"
                assert e.new_ref is not None
                row_version[head] += 1
                head = e.new_ref
                visibility[head] = visibility[e.old_ref]
                row_version[head] = 1
            else:
                assert e.memory_id == head, f"{where} changed a version that was not current"
                row_version[head] += 1
                if e.event is HistoryEventType.DELETE:
                    assert state is MemoryState.ACTIVE, f"{where} forgot a forgotten memory"
                    state = MemoryState.SOFT_DELETED
                elif e.event is HistoryEventType.RESTORE:
                    assert state is MemoryState.SOFT_DELETED, f"{where} restored an active memory"
                    state = MemoryState.ACTIVE
                else:
                    assert e.event is HistoryEventType.PRIVACY, where
                    visibility[head] = Visibility(e.meta["visibility"])
            replayed.append((e.event, head, row_version[head]))

        # Every acknowledged operation is in the history, where its answer says it happened
        # (its version and row version), and nothing else is: refused writes left no trace.
        assert Counter((EVENT_OF[op], m.id, m.row_version) for op, m in acked) == Counter(replayed)
        assert {op for op, _ in acked} >= {"update", "forget"}, "too little was acknowledged"

        # The stored versions are what the replay says.
        versions = engine.versions(memory.id, account_id=ACCOUNT)
        assert versions[-1].id == head and versions[-1].state is state
        assert all(v.state is MemoryState.SUPERSEDED for v in versions[:-1])
        assert {v.id: v.visibility for v in versions} == visibility
        assert {v.id: v.row_version for v in versions} == row_version
