"""What names an erased user after the erasure: nothing, whichever table it sits in.

Operational events: a process queues its events and writes them every few seconds; the
erasure deletes the user's events already written, so those still queued (in the erasing
process, or in any other process over the same store) must not bring the user's id back.
The user's change-log thread (its name is the user's) and the LLM ledger's entries scoped
to the user or to one of their conversations go with the rest.
"""

from __future__ import annotations

import time

import pytest
from tests.conftest import TEST_KEK

from confide.chat.messages import MessageStore
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.llm.usage import UsageLedger
from confide.storage import open_storage
from confide.storage.apps import SqlAppTables
from confide.storage.base import Storage
from confide.storage.jobs import SqlJobTables
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


def _rows(storage: Storage, sql: str) -> list[tuple[object, ...]]:
    with storage.reader_across_accounts() as db:  # type: ignore[attr-defined]
        return [tuple(r) for r in db.run(sql).fetchall()]


def test_the_users_thread_and_ledger_scopes_go_with_the_erasure(
    engine: MemoryEngine, storage: Storage
) -> None:
    for user in ("user-1", "user-2"):
        add(engine, key="walks", value=f"{user} walks by the canal", user_id=user)
        engine.deliver_delta(account_id=ACCOUNT, user_id=user, reader="default")
        MessageStore(engine).add(
            {"account_id": ACCOUNT, "user_id": user, "conversation_id": f"talk-{user[-1]}",
             "role": "user", "content": "I walked by the canal."}
        )  # fmt: skip
    ledger = UsageLedger(SqlAppTables(engine.storage))
    for scope in ("user:user-1", "conversation:talk-1", "user:user-2", "app:notes"):
        ledger.record(
            account_id=ACCOUNT, operation="extraction", scope=scope, prompt_tokens=10,
            completion_tokens=5,
        )  # fmt: skip
    queue = SqlJobTables(engine.storage.database)
    for payload in ({"conversation_id": "talk-1"}, {"user_id": "user-1"}, {"user_id": "user-2"}):
        queue.enqueue("chat_summary", account_id=ACCOUNT, payload=payload, run_at=0, now=0)
    threads = "SELECT thread_id FROM threads ORDER BY thread_id"
    reads = "SELECT thread_id FROM thread_reads ORDER BY thread_id"
    assert _rows(storage, threads) == [(f"{ACCOUNT}/user-1",), (f"{ACCOUNT}/user-2",)]
    assert _rows(storage, reads) == [(f"{ACCOUNT}/user-1",), (f"{ACCOUNT}/user-2",)]

    receipt = engine.erase_user(account_id=ACCOUNT, user_id="user-1")

    assert _rows(storage, threads) == [(f"{ACCOUNT}/user-2",)]
    assert _rows(storage, reads) == [(f"{ACCOUNT}/user-2",)]
    # The ledger keeps its totals (the day's budget is spent all the same), not the names.
    scopes = "SELECT scope, calls FROM llm_usage ORDER BY id"
    assert _rows(storage, scopes) == [(None, 1), (None, 1), ("user:user-2", 1), ("app:notes", 1)]
    assert receipt.deleted["threads"] + receipt.deleted["threads_of_threads"] == 1
    assert receipt.deleted["llm_usage_scopes"] == 2
    # Its jobs have nothing left to work on.
    assert [j.payload for j in queue.jobs()] == [{"user_id": "user-2"}]
    assert receipt.deleted["jobs"] == 2


def test_a_model_call_under_way_at_the_erasure_is_recorded_without_the_users_scope(
    engine: MemoryEngine, storage: Storage
) -> None:
    add(engine, key="walks", value="Walks by the canal", user_id="user-1")
    ledger = UsageLedger(SqlAppTables(engine.storage))
    began = time.time()
    engine.erase_user(account_id=ACCOUNT, user_id="user-1")
    # A call that began before the erasure, recorded when it ended (after it).
    ledger.record(
        account_id=ACCOUNT, operation="extraction", scope="user:user-1", prompt_tokens=10,
        completion_tokens=5, ts=began,
    )  # fmt: skip
    # The user comes back: their new calls are theirs again.
    ledger.record(
        account_id=ACCOUNT, operation="extraction", scope="user:user-1", prompt_tokens=10,
        completion_tokens=5,
    )  # fmt: skip
    scopes = "SELECT scope, calls FROM llm_usage ORDER BY id"
    assert _rows(storage, scopes) == [(None, 1), ("user:user-1", 1)]
