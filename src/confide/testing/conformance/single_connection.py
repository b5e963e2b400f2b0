"""Conformance: every engine operation works with one database connection.

A write transaction holds its connection until it commits; an operation that reads through
the storage (or the key store beside the data) while it holds one needs a second
connection, which a pool of one never gives: on PostgreSQL it would wait for the pool's
timeout and fail. The keys live beside the data here, the strictest case.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import open_storage
from confide.storage.base import Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import TEST_KEK as KEK
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter, Visibility

NEW_KEK = bytes(range(50, 82))


class SingleConnectionConformance(StorageHarness):
    """Every engine operation works with one database connection."""

    @pytest.fixture
    def one_connection(self, storage_url: str) -> Iterator[Storage]:
        """A store whose connection pool, if it has one, holds exactly one connection."""
        store = open_storage(storage_url, pool_min=1, pool_max=1)
        try:
            yield store
        finally:
            store.close()

    def test_every_engine_operation_runs_on_one_connection(
        self, one_connection: Storage, settings: Settings, request: pytest.FixtureRequest
    ) -> None:
        engine = MemoryEngine(one_connection, KeyRing(primary=KEK), settings=settings)
        # Its operational events are written before the store closes (a finalizer runs
        # before the fixture that opened the store is torn down).
        request.addfinalizer(engine.ops.close)
        first = add(engine, value="one connection")
        second = engine.update(first.id, {"value": "still one"}, account_id=ACCOUNT)
        engine.update_by_key(
            account_id=ACCOUNT, user_id="user-1", key="favorite_color", value="red"
        )
        engine.mark_private(second.id, account_id=ACCOUNT)
        engine.set_visibility(second.id, Visibility.SHARED, account_id=ACCOUNT)
        gone = add(engine, key="gone", value="to purge")
        engine.forget(gone.id, account_id=ACCOUNT)
        engine.restore(gone.id, account_id=ACCOUNT)
        engine.forget(gone.id, account_id=ACCOUNT)
        assert engine.purge_expired(now=time.time() + 31 * 86400).purged == 1
        engine.history(second.id, account_id=ACCOUNT)
        assert engine.delta_since(f"{ACCOUNT}/user-1", 0, account_id=ACCOUNT, user_id="user-1")
        assert engine.deliver_delta(account_id=ACCOUNT, user_id="user-1", reader="default")
        document = engine.export_user(account_id=ACCOUNT, user_id="user-1")
        engine.import_user(document, account_id=ACCOUNT, user_id="user-2")
        engine.purge_scope(account_id=ACCOUNT, user_id="user-2")
        engine.rotate_kek(KeyRing(primary=NEW_KEK, former={engine.keyring.primary_id: KEK}))
        assert engine.retire_former_keks()
        receipt = engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert receipt.key_ids_destroyed
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []
        again = add(engine, value="after erasure")
        assert engine.get(again.id, account_id=ACCOUNT).value == "after erasure"
