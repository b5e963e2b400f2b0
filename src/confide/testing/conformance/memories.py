"""Conformance: store, update, get, list, forget, restore, privacy — on every backend."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from confide.engine import MemoryEngine
from confide.errors import ConflictError, NotFoundError, StorageError, ValidationError
from confide.storage.base import Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import (
    HistoryEventType,
    MemoryFilter,
    MemoryState,
    MemoryType,
    Source,
    Visibility,
    utcnow,
)


def _item(key: str) -> dict[str, Any]:
    return {"account_id": ACCOUNT, "user_id": "user-1", "key": key, "value": f"about {key}"}


class MemoriesConformance(StorageHarness):
    """Store, update, get, list, forget, restore and history through the engine."""

    def test_store_and_get_round_trip(self, engine: MemoryEngine) -> None:
        stored = add(
            engine,
            key="daughter_name",
            value="Her daughter is called Maya.",
            type="fact",
            category="family",
            agent_id="companion",
            run_id="call-1",
            actor_id="agent-7",
            role="user",
            subject_id="subject-1",
            confidence=0.9,
            importance=4,
            source="tool",
            visibility="line_only",
            pinned=True,
            tags=("family",),
            metadata={"origin": "test"},
        )
        got = engine.get(stored.id, account_id=ACCOUNT)
        assert got == stored
        assert got.value == "Her daughter is called Maya."
        assert got.visibility is Visibility.PRIVATE
        assert got.type is MemoryType.FACT and got.source is Source.TOOL
        assert (got.version, got.state, got.lineage_id) == (1, MemoryState.ACTIVE, got.id)
        assert got.tags == ("family",) and got.metadata == {"origin": "test"}

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("importance", 6),
            ("importance", 0),
            ("confidence", 1.5),
            ("confidence", -0.1),
            ("key", "has spaces"),
            ("key", ""),
            ("value", "   "),
            ("type", "gossip"),
            ("visibility", "public"),
            ("account_id", ""),
        ],
    )
    def test_out_of_range_fields_raise_validation_error(
        self, engine: MemoryEngine, field: str, value: object
    ) -> None:
        out_of_range: dict[str, Any] = {field: value}
        with pytest.raises(ValidationError, match=field):
            add(engine, **out_of_range)
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT)) == []

    def test_update_writes_new_version_and_supersedes_old(self, engine: MemoryEngine) -> None:
        first = add(engine, value="blue")
        second = engine.update(first.id, {"value": "green", "importance": 3}, account_id=ACCOUNT)
        assert second.id != first.id
        assert (second.version, second.supersedes_id, second.lineage_id) == (2, first.id, first.id)
        assert second.value == "green" and second.importance == 3
        assert second.created_at == first.created_at
        assert engine.get(first.id, account_id=ACCOUNT).state is MemoryState.SUPERSEDED
        assert engine.get(first.id, account_id=ACCOUNT).value == "blue"
        # Updating through the old id acts on the newest version.
        third = engine.update(first.id, {"value": "red"}, account_id=ACCOUNT)
        assert (third.version, third.supersedes_id) == (3, second.id)
        active = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert [m.id for m in active] == [third.id]
        assert [v.version for v in engine.versions(third.id, account_id=ACCOUNT)] == [1, 2, 3]

    def test_update_rejects_invalid_patch_and_keeps_memory(self, engine: MemoryEngine) -> None:
        first = add(engine)
        with pytest.raises(ValidationError, match="importance"):
            engine.update(first.id, {"importance": 9}, account_id=ACCOUNT)
        assert engine.get(first.id, account_id=ACCOUNT).state is MemoryState.ACTIVE
        assert len(engine.versions(first.id, account_id=ACCOUNT)) == 1

    def test_key_lookup_is_case_insensitive_within_owner(self, engine: MemoryEngine) -> None:
        add(engine, key="Preferred_Name", value="Call me Sam")
        add(engine, key="preferred_name", value="Other user", user_id="user-2")
        found = engine.get_by_key(account_id=ACCOUNT, user_id="user-1", key="PREFERRED_NAME")
        assert found is not None and found.value == "Call me Sam"
        updated, action = engine.update_by_key(
            account_id=ACCOUNT, user_id="user-1", key="preferred_name", value="Call me Samuel"
        )
        assert action == "updated" and updated.version == 2 and updated.key == "Preferred_Name"
        created, action = engine.update_by_key(
            account_id=ACCOUNT, user_id="user-1", key="dog_name", value="Rex", type=MemoryType.FACT
        )
        assert action == "created" and created.version == 1
        other = engine.get_by_key(account_id=ACCOUNT, user_id="user-2", key="preferred_name")
        assert other is not None and other.value == "Other user"

    def test_forget_and_restore(self, engine: MemoryEngine) -> None:
        memory = add(engine)
        forgotten = engine.forget(memory.id, account_id=ACCOUNT)
        assert forgotten.state is MemoryState.SOFT_DELETED
        assert forgotten.purge_at is not None and forgotten.purge_at > utcnow() + timedelta(days=29)
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT)) == []
        assert engine.get_by_key(account_id=ACCOUNT, user_id="user-1", key=memory.key) is None
        with pytest.raises(ConflictError):
            engine.update(memory.id, {"value": "x"}, account_id=ACCOUNT)
        with pytest.raises(ConflictError):
            engine.forget(memory.id, account_id=ACCOUNT)
        restored = engine.restore(memory.id, account_id=ACCOUNT)
        assert restored.state is MemoryState.ACTIVE and restored.purge_at is None
        assert restored.value == "blue"
        with pytest.raises(ConflictError):
            engine.restore(memory.id, account_id=ACCOUNT)

    def test_mark_private_and_shared(self, engine: MemoryEngine) -> None:
        memory = add(engine)
        shared = engine.mark_shared(memory.id, account_id=ACCOUNT)
        assert shared.visibility is Visibility.SHARED and shared.version == 1
        private = engine.mark_private(memory.id, account_id=ACCOUNT)
        assert private.visibility is Visibility.PRIVATE
        events = [e.event for e in engine.history(memory.id, account_id=ACCOUNT)]
        assert events == [HistoryEventType.PRIVACY, HistoryEventType.PRIVACY, HistoryEventType.ADD]

    def test_history_covers_all_versions_newest_first(self, engine: MemoryEngine) -> None:
        first = add(engine)
        second = engine.update(first.id, {"value": "green"}, account_id=ACCOUNT, actor="agent")
        engine.forget(second.id, account_id=ACCOUNT)
        engine.restore(second.id, account_id=ACCOUNT)
        history = engine.history(first.id, account_id=ACCOUNT)
        assert [e.event for e in history] == [
            HistoryEventType.RESTORE,
            HistoryEventType.DELETE,
            HistoryEventType.UPDATE,
            HistoryEventType.ADD,
        ]
        update = history[2]
        assert (update.old_ref, update.new_ref, update.actor) == (first.id, second.id, "agent")
        assert history == engine.history(second.id, account_id=ACCOUNT)
        for event in history:
            assert "blue" not in str(event.meta) and "green" not in str(event.meta)

    def test_unknown_ids_are_not_found(self, engine: MemoryEngine) -> None:
        with pytest.raises(NotFoundError):
            engine.get("no-such-id", account_id=ACCOUNT)
        with pytest.raises(NotFoundError):
            engine.update("no-such-id", {"value": "x"}, account_id=ACCOUNT)
        with pytest.raises(NotFoundError):
            engine.forget("no-such-id", account_id=ACCOUNT)

    def test_accounts_are_isolated(self, engine: MemoryEngine) -> None:
        memory = add(engine)
        with pytest.raises(NotFoundError):
            engine.get(memory.id, account_id="acct-2")
        with pytest.raises(NotFoundError):
            engine.forget(memory.id, account_id="acct-2")
        assert engine.list_memories(MemoryFilter(account_id="acct-2")) == []
        assert engine.get(memory.id, account_id=ACCOUNT).state is MemoryState.ACTIVE

    def test_users_see_own_plus_shared_within_subject(self, engine: MemoryEngine) -> None:
        mine = add(engine, key="a", subject_id="grandma")
        shared = add(engine, key="b", user_id="user-2", subject_id="grandma", visibility="shared")
        add(engine, key="c", user_id="user-2", subject_id="grandma", visibility="private")
        add(engine, key="d", user_id="user-2", subject_id="other", visibility="shared")
        flt = MemoryFilter(
            account_id=ACCOUNT, user_id="user-1", subject_id="grandma", include_shared=True
        )
        assert {m.id for m in engine.list_memories(flt)} == {mine.id, shared.id}
        own_only = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        assert {m.id for m in engine.list_memories(own_only)} == {mine.id}

    def test_list_filters_apply_in_database(self, engine: MemoryEngine) -> None:
        a = add(engine, key="a", type="preference", category="food", importance=1, agent_id="x")
        b = add(engine, key="b", type="fact", category="family", importance=5, run_id="r1")
        c = add(engine, key="c", type="follow_up", pinned=True, actor_id="bot", role="assistant")
        d = add(
            engine,
            key="d",
            type="context",
            visibility="shared",
            source="extraction",
            confidence=0.3,
        )

        def ids(**kw: object) -> set[str]:
            flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1", **kw)
            return {m.id for m in engine.list_memories(flt)}

        assert ids(types=(MemoryType.PREFERENCE, MemoryType.FACT)) == {a.id, b.id}
        assert ids(categories=("family",)) == {b.id}
        assert ids(agent_id="x") == {a.id}
        assert ids(run_id="r1") == {b.id}
        assert ids(actor_id="bot", role="assistant") == {c.id}
        assert ids(pinned=True) == {c.id}
        assert ids(visibility=Visibility.SHARED) == {d.id}
        assert ids(source=Source.EXTRACTION) == {d.id}
        assert ids(importance_min=4) == {b.id}
        assert ids(importance_max=1) == {a.id}
        assert ids(importance_min=2, importance_max=2) == {c.id, d.id}
        assert ids(confidence_min=0.5) == {a.id, b.id, c.id}
        assert ids(keys=("A", "b")) == {a.id, b.id}
        later = utcnow()
        assert ids(updated_after=later) == set()
        assert ids(updated_before=later) == {a.id, b.id, c.id, d.id}
        assert ids(created_after=b.created_at, created_before=d.created_at) == {b.id, c.id}
        engine.forget(d.id, account_id=ACCOUNT)
        assert ids(states=(MemoryState.SOFT_DELETED,)) == {d.id}

    def test_listing_pages_newest_first(self, engine: MemoryEngine) -> None:
        stored = [add(engine, key=f"k{i}") for i in range(5)]
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
        first = engine.list_memories(flt, limit=2)
        rest = engine.list_memories(flt, limit=10, offset=2)
        assert [m.id for m in first + rest] == [m.id for m in reversed(stored)]
        with pytest.raises(ValidationError):
            engine.list_memories(flt, limit=0)

    def test_a_batch_logs_consecutive_changes_after_the_threads_last(
        self, engine: MemoryEngine
    ) -> None:
        # A batch reserves its revisions in one step and writes without reading back: the
        # log must read as if each memory had taken the next revision in turn.
        first = add(engine, "first", "one", thread_id="thread-b")
        batch = engine.store_many([_item(f"turn-{i}") for i in range(4)], thread_id="thread-b")
        other = add(engine, "elsewhere", "two", thread_id="thread-c")
        last = add(engine, "last", "three", thread_id="thread-b")
        logged = sorted(engine.changes_since("thread-b", 0), key=lambda c: c.rev)
        assert [c.rev for c in logged] == [1, 2, 3, 4, 5, 6]
        assert [c.memory_id for c in logged] == [m.id for m in (first, *batch, last)]
        assert engine.current_rev("thread-b") == 6
        assert [c.memory_id for c in engine.changes_since("thread-c", 0)] == [other.id]

    def test_a_batch_that_fails_writes_nothing(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        # The batch's statements may be sent without waiting for each answer (a server's
        # pipeline): a late failure must still roll back every row sent before it.
        kept = add(engine, "kept", "kept")
        doomed = engine.store_many([_item(f"doomed-{i}") for i in range(3)])
        rows = [storage.get_memory(ACCOUNT, m.id) for m in doomed]
        before = len(engine.list_memories(MemoryFilter(account_id=ACCOUNT), limit=100))
        with pytest.raises(StorageError), storage.transaction() as tx, tx.pipelined():
            for row in rows[:2]:
                assert row is not None
                tx.insert_memory(row._replace(id=f"{row.id}-copy"))
            assert rows[2] is not None
            tx.insert_memory(rows[2])  # its id exists: the batch fails here or at its end
        after = engine.list_memories(MemoryFilter(account_id=ACCOUNT), limit=100)
        assert len(after) == before
        assert all(not m.id.endswith("-copy") for m in after)
        assert engine.get(kept.id, account_id=ACCOUNT).value == "kept"

    def test_a_batch_keeps_its_order(self, engine: MemoryEngine, storage: Storage) -> None:
        # Stored together, yet newest first and oldest first follow the batch's order: the
        # next turn of a run is linked to the batch's last one, and a reindex replays them
        # in order (neither may hang on random ids breaking a tie).
        batch = [
            {"account_id": ACCOUNT, "user_id": "user-1", "key": f"turn-{i}", "value": "hi"}
            for i in range(12)
        ]
        made = engine.store_many([{**item, "run_id": "call-9"} for item in batch])
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1", run_id="call-9")
        newest = engine.list_memories(flt, limit=50)
        assert [m.id for m in newest] == [m.id for m in reversed(made)]
        oldest = [row.id for row in storage.iter_owner(ACCOUNT, "user-1")]
        assert oldest == [m.id for m in made]
        assert all(a.created_at < b.created_at for a, b in itertools.pairwise(made))
