"""Chat messages on both backends: indexes, pages, ownership, sealing, erasure, retention."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from confide.chat import ChatMemory
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, ValidationError
from confide.storage.base import Capability, Storage

ACCOUNT = "acct-1"


def _msg(i: int, *, user: str = "ann", conversation: str = "c1", **extra: Any) -> dict[str, Any]:
    return {
        "account_id": ACCOUNT,
        "user_id": user,
        "conversation_id": conversation,
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"message number {i} about the blue kettle",
        **extra,
    }


def test_messages_get_consecutive_indexes_and_page_by_cursor(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    saved = [chat.add_message(_msg(i, channel="web", subject_id="granny")) for i in range(7)]
    assert [s.index for s in saved] == list(range(7))
    assert len({s.id for s in saved}) == 7
    first = chat.list_messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1", limit=3)
    assert [m.index for m in first.messages] == [0, 1, 2]
    assert first.next_cursor == 2
    assert first.messages[1].role == "assistant"
    assert first.messages[0].content == "message number 0 about the blue kettle"
    assert first.messages[0].channel == "web" and first.messages[0].subject_id == "granny"
    rest = chat.list_messages(
        account_id=ACCOUNT, user_id="ann", conversation_id="c1", cursor=2, limit=10
    )
    assert [m.index for m in rest.messages] == [3, 4, 5, 6]
    assert rest.next_cursor is None
    # Another conversation counts from 0 on its own.
    assert chat.add_message(_msg(0, conversation="c2")).index == 0


def test_concurrent_writers_never_share_an_index(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    indexes: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def write(worker: int) -> None:
        start.wait()
        for i in range(5):
            saved = chat.add_message(_msg(worker * 10 + i))
            with lock:
                indexes.append(saved.index)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(indexes) == list(range(20))


def test_another_users_conversation_is_not_found(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    chat.add_message(_msg(0))
    with pytest.raises(NotFoundError):
        chat.add_message(_msg(1, user="bob"))
    with pytest.raises(NotFoundError):
        chat.list_messages(account_id=ACCOUNT, user_id="bob", conversation_id="c1")
    with pytest.raises(NotFoundError):
        chat.retrieve("kettle", account_id=ACCOUNT, user_id="bob", conversation_id="c1")
    # Nothing of bob's was written.
    page = chat.list_messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1")
    assert [m.index for m in page.messages] == [0]


@pytest.mark.parametrize(
    "change",
    [
        {"content": ""},
        {"content": "x" * 32_001},
        {"role": "system"},
        {"conversation_id": ""},
        {"user_id": ""},
        {"channel": ""},
        {"surprise": 1},
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    engine: MemoryEngine, change: dict[str, Any]
) -> None:
    chat = ChatMemory(engine)
    with pytest.raises(ValidationError):
        chat.add_message({**_msg(0), **change})
    assert engine.storage.count_rows("messages", ACCOUNT, "ann") == 0


@pytest.mark.requires(Capability.DATA_FILES)
def test_message_text_is_sealed_at_rest(engine: MemoryEngine, storage: Storage) -> None:
    chat = ChatMemory(engine)
    chat.add_message({**_msg(0), "content": "periwinkle-aardvark-secret"})
    storage.scrub()  # fold the logs into the data files
    blobs = [p.read_bytes() for p in storage.data_files()]
    assert blobs
    assert not any(b"periwinkle-aardvark-secret" in b for b in blobs)
    page = chat.list_messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1")
    assert page.messages[0].content == "periwinkle-aardvark-secret"


def test_erasure_removes_messages_and_summaries(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    for i in range(32):
        chat.add_message(_msg(i))
    outcome = asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"))
    assert outcome is not None
    chat.add_message(_msg(0, user="bob", conversation="c9"))
    storage = engine.storage
    assert storage.count_rows("messages", ACCOUNT, "ann") == 32
    assert storage.count_rows("conversation_summaries", ACCOUNT, "ann") == 1
    receipt = engine.erase_user(account_id=ACCOUNT, user_id="ann")
    assert receipt.deleted["messages"] == 32
    assert receipt.deleted["conversation_summaries"] == 1
    assert storage.count_rows("messages", ACCOUNT, "ann") == 0
    assert storage.count_rows("conversation_summaries", ACCOUNT, "ann") == 0
    assert storage.count_rows("messages", ACCOUNT, "bob") == 1
    # The conversation is free again, and counts from 0.
    assert chat.add_message(_msg(0, user="carol")).index == 0


def test_summarised_messages_are_kept_without_a_retention(engine: MemoryEngine) -> None:
    assert engine.settings.message_retention_days is None  # the default: keep them
    chat = ChatMemory(engine)
    for i in range(31):
        chat.add_message(_msg(i))
    assert asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"))
    assert chat.purge_messages(now=time.time() + 3650 * 86400) == 0
    page = chat.list_messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1")
    assert [m.index for m in page.messages] == list(range(31))
    assert page.messages[0].content == "message number 0 about the blue kettle"


def test_summarised_messages_are_purged_after_a_retention_set(engine: MemoryEngine) -> None:
    chat = ChatMemory(
        engine, settings=engine.settings.model_copy(update={"message_retention_days": 30.0})
    )
    for i in range(31):
        chat.add_message(_msg(i))
    assert asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"))
    now = time.time()
    assert chat.purge_messages(now=now + 29 * 86400) == 0
    assert chat.purge_messages(now=now + 31 * 86400) == 20
    page = chat.list_messages(account_id=ACCOUNT, user_id="ann", conversation_id="c1")
    assert [m.index for m in page.messages] == list(range(20, 31))
    # New messages continue after the purged ones.
    assert chat.add_message(_msg(31)).index == 31
