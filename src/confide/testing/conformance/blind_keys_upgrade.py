"""A store written before keys were blinded upgrades when it is opened (the ``blind-keys`` steps).

The older layout is made the way older Confide wrote it: the key in clear in ``memories.key``
and ``key_lc``, in history and change-log meta, in session events and proposals; the sealed
payload without the key and bound to owner and id only.
"""

from __future__ import annotations

import json
import time

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.errors import TamperedRowError
from confide.storage.base import (
    KEYS_BLINDED,
    SERVICE_KEYS_BLINDED,
    ChangeRow,
    HistoryRow,
    MemoryRow,
    Storage,
)
from confide.storage.service import CallSessionRow, ProposalRow
from confide.storage.service.sessions import SqlServiceTables
from confide.testing.builders import ACCOUNT, unstored_memory
from confide.testing.conformance.blind_keys import assert_no_clear_keys, raw_rows
from confide.testing.conformance.harness import StorageHarness, unrecord_steps
from confide.types import Memory, MemoryFilter, MemoryType

TEST_KEK = bytes(range(32))
OLD_KEYS = ("dislikes_ex_husband_robert", "likes_cocaine")


def _legacy_memory(engine: MemoryEngine, key: str, value: str, memory_id: str) -> Memory:
    """Write one memory, its history and change-log rows as an older Confide did."""
    base = unstored_memory(0, value, key)
    memory = base.model_copy(
        update={
            "id": memory_id,
            "lineage_id": memory_id,
            "type": MemoryType.PREFERENCE,
            "category": "preference",
        }
    )
    now = memory.created_at
    key_id, user_key = engine.keys.user_key(ACCOUNT, "user-1")
    payload = json.dumps({"v": value, "t": [], "m": {}}).encode()
    sealed = engine.envelope.seal(user_key, payload, ACCOUNT, "user-1", memory_id)  # unbound
    ts = now.timestamp()
    row = MemoryRow(
        memory_id, ACCOUNT, "user-1", None, None, None, None, None, "preference", "preference",
        key, 1.0, 2, "api", "private", False, "active", 1, 1, None, memory_id, ts, ts, None, None,
        None, None, key_id, sealed.ciphertext, sealed.wrapped_key,
    )  # fmt: skip
    meta = json.dumps({"key": key, "type": "preference"})
    with engine.storage.transaction() as tx:
        tx.insert_memory(row)
        tx.add_history(
            HistoryRow(0, ACCOUNT, "user-1", memory_id, memory_id, "ADD", None, memory_id, None,
                       meta, time.time())
        )  # fmt: skip
        rev = tx.next_rev(ACCOUNT, "t1")
        tx.add_change(ACCOUNT, ChangeRow("t1", rev, memory_id, "ADD", meta, time.time()))
    return memory


def _legacy_service_rows(engine: MemoryEngine) -> str:
    """A session event and a proposal with clear keys; returns the proposal id."""
    tables = SqlServiceTables(engine.storage.database)
    tables.insert_session(
        CallSessionRow("s1", ACCOUNT, "user-1", False, time.time(), None, None, 0, 0, None)
    )
    tables.add_tool_call(
        "s1", account_id=ACCOUNT, tool="store_memory", memory_id="m1", key=OLD_KEYS[0],
        memory_type="fact", ts=time.time(),
    )  # fmt: skip
    key_id, user_key = engine.keys.user_key(ACCOUNT, "user-1")
    payload = json.dumps({"current": "old", "proposed": "new"}).encode()
    sealed = engine.envelope.seal(user_key, payload, ACCOUNT, "user-1", "p1")
    now = time.time()
    tables.insert_proposal(
        ProposalRow("p1", ACCOUNT, "user-1", "likes_cocaine", "preference", 0.9, "s1", "pending",
                    now, now + 3600, None, key_id, sealed.ciphertext, sealed.wrapped_key)
    )  # fmt: skip
    return "p1"


class BlindKeysUpgradeConformance(StorageHarness):
    """A store written before keys were blinded upgrades on open."""

    def test_an_older_store_has_its_keys_blinded_when_opened(
        self, storage: Storage, settings: Settings
    ) -> None:
        writer = MemoryEngine(storage, KeyRing(primary=TEST_KEK))
        first = _legacy_memory(
            writer, OLD_KEYS[0], "he lied", "00000000-0000-4000-8000-000000000001"
        )
        _legacy_memory(writer, OLD_KEYS[1], "on weekends", "00000000-0000-4000-8000-000000000002")
        _legacy_service_rows(writer)
        # Roll the store back to before keys were blinded, as an older Confide left it.
        unrecord_steps(storage, "memories", version=6)
        unrecord_steps(storage, "service", version=4)
        with storage.database.transaction() as tx:
            tx.run("DELETE FROM store_meta WHERE key IN ('keys_blinded', 'service_keys_blinded')")
        assert OLD_KEYS[0] in raw_rows(storage)
        storage.migrate()
        pending = raw_rows(storage, ("store_meta",))
        assert "('keys_blinded', 'pending')" in pending
        assert "('service_keys_blinded', 'pending')" in pending

        engine = MemoryEngine(storage, KeyRing(primary=TEST_KEK), settings=settings)
        assert_no_clear_keys(raw_rows(storage), OLD_KEYS)
        assert storage.meta_value(KEYS_BLINDED) == "done"
        assert engine.get(first.id, account_id=ACCOUNT).key == OLD_KEYS[0]
        found = engine.get_by_key(account_id=ACCOUNT, user_id="user-1", key="LIKES_COCAINE")
        assert found is not None and found.value == "on weekends"
        assert engine.history(first.id, account_id=ACCOUNT)[0].meta["key"] == OLD_KEYS[0]
        assert engine.delta_since("t1", 0, account_id=ACCOUNT, user_id="user-1") == (
            "Memory updates since rev 0:\n"
            "- +created: [Preference] Likes cocaine is on weekends (imp=2)\n"
            "- +created: [Preference] Dislikes ex husband robert is he lied (imp=2)"
        )
        # The upgraded rows are bound like new ones: a flipped visibility is caught.
        with storage.database.transaction() as tx:
            tx.run("UPDATE memories SET visibility = 'shared' WHERE id = ?", [first.id])
        with pytest.raises(TamperedRowError):
            engine.get(first.id, account_id=ACCOUNT)

        pytest.importorskip("fastapi", reason="the service's tables need the server extra")
        from confide.server import create_app

        app = create_app(settings, engine=engine)  # the service upgrades its own tables
        assert storage.meta_value(SERVICE_KEYS_BLINDED) == "done"
        assert_no_clear_keys(raw_rows(storage, ("session_events", "proposals")), OLD_KEYS)
        proposal = app.state.services.proposals.get("p1", account_id=ACCOUNT)
        assert (proposal.key, proposal.proposed_value) == ("likes_cocaine", "new")

    def test_an_unbound_row_is_refused_once_the_store_is_upgraded(
        self, engine: MemoryEngine
    ) -> None:
        # A fresh store is upgraded from the start: an old-style row put back into it (say, from
        # a backup, with its visibility changed) does not open.
        legacy = _legacy_memory(
            engine, "diagnosis", "private", "00000000-0000-4000-8000-000000000003"
        )
        with pytest.raises(TamperedRowError):
            engine.get(legacy.id, account_id=ACCOUNT)
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []
