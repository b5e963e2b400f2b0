"""Operational events queued before an erasure are not written after it, by any process.

A process queues its events and writes them every few seconds; the erasure deletes the
user's events already written, so those still queued (in the erasing process, or in any
other process over the same store) must not bring the user's id back once written.
"""

from __future__ import annotations

import pytest
from tests.conftest import TEST_KEK

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import open_storage
from confide.storage.keystore import open_key_store
from confide.testing.builders import ACCOUNT, add


def test_events_queued_before_an_erasure_are_dropped_and_later_ones_kept(
    engine: MemoryEngine, storage_url: str, key_store_url: str, request: pytest.FixtureRequest
) -> None:
    other = MemoryEngine(
        open_storage(storage_url, pool_max=2),
        KeyRing(primary=TEST_KEK),
        settings=engine.settings,
        key_store=open_key_store(key_store_url),
    )
    request.addfinalizer(other.close)
    add(engine, key="walks", value="Walks by the canal", user_id="user-1")
    add(engine, key="walks", value="Swims in the lake", user_id="user-2")
    # Queued, not yet written: by the erasing process and by another one.
    engine.emit_op("hotpath", "search", account_id=ACCOUNT, user_id="user-1")
    other.emit_op("hotpath", "search", account_id=ACCOUNT, user_id="user-1")
    other.emit_op("hotpath", "search", account_id=ACCOUNT, user_id="user-2")

    engine.erase_user(account_id=ACCOUNT, user_id="user-1")
    other.ops.flush()
    # The user comes back after the erasure: what they do from then on is recorded.
    other.emit_op("hotpath", "classify", account_id=ACCOUNT, user_id="user-1")
    other.ops.flush()

    events = engine.op_events(account_id=ACCOUNT)
    assert [(e.user_id, e.op) for e in events if e.user_id == "user-1"] == [("user-1", "classify")]
    assert ("user-2", "search") in [(e.user_id, e.op) for e in events]
