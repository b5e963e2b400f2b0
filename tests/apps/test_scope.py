"""App scopes on both backends: one memory per ended conversation (LLM or offline), the
cap, isolation from users and other apps in the database, and the end route."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError as PydanticValidationError
from tests.apps.conftest import ACCOUNT, llm_of, transcript

from confide.apps import AppMemories, AppScope, offline_paragraph
from confide.apps.scope import AppMessage
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.storage.chat import SqlMessageTables
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply
from confide.types import MemoryFilter, NewMemory

PARAGRAPH = "The user prefers option 1 for the report. The deadline moved to Friday."


def _end(apps: AppMemories, app_id: str, n: int, account: str = ACCOUNT) -> None:
    asyncio.run(
        apps.end_conversation(
            account_id=account, app_id=app_id, conversation_id=f"c{n}", messages=transcript(n)
        )
    )


def test_one_llm_call_writes_one_memory(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(PARAGRAPH)
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT, app_id="notes", conversation_id="c1", messages=transcript(1),
            reason="closed",
        )
    )  # fmt: skip
    assert outcome.written_by == "llm"
    assert len(llm_server.requests) == 1
    sent = llm_server.requests[0].messages
    assert "at most 200 characters" in sent[0]["content"]
    assert "user: I prefer option 1 for the report." in sent[1]["content"]
    [memory] = apps.memories(ACCOUNT, "notes")
    assert memory.value == PARAGRAPH
    assert memory.app_id == "notes"
    assert memory.metadata == {"conversation_id": "c1", "written_by": "llm", "end_reason": "closed"}
    # The messages are not stored: no chat message row exists.
    assert SqlMessageTables(engine.storage).count(ACCOUNT, "c1") == 0


def test_long_answer_is_clipped_to_200(engine: MemoryEngine, llm_server: ScriptedLLMServer) -> None:
    llm_server.enqueue("word " * 100)
    apps = AppMemories(engine, llm=llm_of(llm_server))
    _end(apps, "notes", 1)
    [memory] = apps.memories(ACCOUNT, "notes")
    assert len(memory.value) <= 200


def test_without_llm_an_offline_paragraph(engine: MemoryEngine) -> None:
    apps = AppMemories(engine, llm=None)
    messages = [
        {"role": "user", "content": "Hello there. I always want the summary in bullet points."},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "We fixed the login bug today. Next we need to add tests"},
    ]
    outcome = asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT, app_id="notes", conversation_id="c1", messages=messages
        )
    )
    assert outcome.written_by == "offline"
    [memory] = apps.memories(ACCOUNT, "notes")
    assert memory.value == (
        "The user always wants the summary in bullet points. The user and others fixed the "
        "login bug today. Next the user and others need to add tests."
    )
    assert len(memory.value) <= 200


def test_llm_failure_falls_back_to_the_offline_paragraph(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(ScriptedReply(status=503, body=b"{}"))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT, app_id="notes", conversation_id="c1", messages=transcript(3)
        )
    )
    assert outcome.written_by == "offline"
    assert [m.value for m in apps.memories(ACCOUNT, "notes")] == [
        "The user prefers option 3 for the report."
    ]


def test_offline_paragraph_is_deterministic_and_short() -> None:
    long = [AppMessage(role="user", content="I like " + "very " * 80 + "long sentences.")]
    assert offline_paragraph(long) == offline_paragraph(long)
    assert len(offline_paragraph(long)) <= 200


def test_isolation_from_users_and_other_apps(engine: MemoryEngine) -> None:
    apps = AppMemories(engine, llm=None)
    _end(apps, "notes", 1)
    _end(apps, "mail", 2)
    _end(apps, "notes", 3, account="acct-2")
    # The app's owner id is reserved: no user's memory is stored (or sealed) under it.
    with pytest.raises(PydanticValidationError, match="reserved for app scopes"):
        NewMemory(account_id=ACCOUNT, user_id="app:notes", key="k", value="user's own")
    engine.store(NewMemory(account_id=ACCOUNT, user_id="u1", key="k", value="user's own"))
    assert [m.metadata["conversation_id"] for m in apps.memories(ACCOUNT, "notes")] == ["c1"]
    assert [m.metadata["conversation_id"] for m in apps.memories(ACCOUNT, "mail")] == ["c2"]
    assert [m.metadata["conversation_id"] for m in apps.memories("acct-2", "notes")] == ["c3"]
    user_view = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="u1"))
    assert [m.value for m in user_view] == ["user's own"]
    everything = engine.list_memories(MemoryFilter(account_id=ACCOUNT))
    assert [m.value for m in everything] == ["user's own"]
    counted = engine.storage.count_memories(MemoryFilter(account_id=ACCOUNT, app_id="notes"))
    assert counted == 1


def test_cap_default_and_override(engine: MemoryEngine) -> None:
    apps = AppMemories(engine, llm=None)
    assert apps.settings_of(ACCOUNT, "notes").memory_cap == 10
    for n in range(12):
        _end(apps, "notes", n)
    assert len(apps.memories(ACCOUNT, "notes")) == 10
    apps.configure(ACCOUNT, "notes", name="Notes", memory_cap=3)
    _end(apps, "notes", 12)
    assert len(apps.memories(ACCOUNT, "notes")) == 3
    assert apps.settings_of(ACCOUNT, "notes").name == "Notes"
    with pytest.raises(ValidationError):
        apps.configure(ACCOUNT, "notes", memory_cap=0)


def test_bad_app_id_and_messages_are_refused(engine: MemoryEngine) -> None:
    apps = AppMemories(engine, llm=None)
    with pytest.raises(ValidationError):
        AppScope(ACCOUNT, "bad id!")
    for messages in ([], [{"role": "robot", "content": "x"}], [{"role": "user", "content": ""}]):
        with pytest.raises(ValidationError):
            asyncio.run(
                apps.end_conversation(
                    account_id=ACCOUNT, app_id="notes", conversation_id="c", messages=messages
                )
            )
    assert apps.memories(ACCOUNT, "notes") == []
