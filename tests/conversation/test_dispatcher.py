"""The engine dispatcher and the de-duplication policy, on both backends."""

from __future__ import annotations

import json

import pytest

from confide.conversation.buffer import Session, SessionBuffer
from confide.conversation.dedup import DedupPolicy, normalise
from confide.conversation.dispatcher import EngineDispatcher
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, ValidationError
from confide.types import MemoryFilter, MemoryType, Visibility


def session(buffer: SessionBuffer, user: str = "u1") -> Session:
    return buffer.start(f"s-{user}", account_id="acct-1", user_id=user)


@pytest.mark.asyncio
async def test_dispatch_store_update_forget_private(engine: MemoryEngine) -> None:
    writes: list[str] = []
    dispatcher = EngineDispatcher(engine, on_write=writes.append)
    live = session(SessionBuffer())
    stored = await dispatcher.dispatch(
        "store_memory",
        json.dumps({"memory_type": "follow_up", "key": "visit_grandson",
                    "value": "grandson visits Friday", "suggest_reminder": True}),
        live,
    )  # fmt: skip
    assert stored["suggestReminder"] is True and stored["action"] == "created"
    updated = await dispatcher.dispatch(
        "update_memory", json.dumps({"existing_key": "VISIT_GRANDSON", "new_value": "Sunday"}), live
    )
    assert updated["action"] == "updated"
    private = await dispatcher.dispatch("mark_private", '{"key": "visit_grandson"}', live)
    memory = engine.get(private["memoryId"], account_id="acct-1")
    assert memory.visibility == Visibility.PRIVATE and memory.value == "Sunday"
    await dispatcher.dispatch("forget_memory", json.dumps({"memory_id": memory.id}), live)
    assert engine.list_memories(MemoryFilter(account_id="acct-1", user_id="u1")) == []
    assert writes == ["created", "updated"]


@pytest.mark.asyncio
async def test_dispatch_refuses_bad_calls_and_other_users_memories(engine: MemoryEngine) -> None:
    dispatcher = EngineDispatcher(engine)
    buffer = SessionBuffer()
    mine = await dispatcher.dispatch(
        "store_memory", '{"memory_type": "fact", "key": "k", "value": "v"}', session(buffer)
    )
    with pytest.raises(NotFoundError):
        await dispatcher.dispatch(
            "forget_memory", json.dumps({"memory_id": mine["memoryId"]}), session(buffer, "u2")
        )
    with pytest.raises(ValidationError):
        await dispatcher.dispatch("store_memory", '{"key": "k"}', session(buffer))
    with pytest.raises(ValidationError, match="memory_query"):
        await dispatcher.dispatch("memory_query", '{"query": "tea"}', session(buffer))


@pytest.mark.asyncio
async def test_tool_values_pass_the_writing_rules_before_they_are_stored(
    engine: MemoryEngine,
) -> None:
    dispatcher = EngineDispatcher(engine)
    live = session(SessionBuffer())
    stored = await dispatcher.dispatch(
        "store_memory", '{"memory_type": "fact", "key": "living_situation", '
        '"value": "I live alone with my cat"}', live
    )  # fmt: skip
    memory = engine.get(stored["memoryId"], account_id="acct-1")
    assert memory.value == "The user lives alone with their cat"
    with pytest.raises(ValidationError, match=r"not_self_contained") as refused:
        await dispatcher.dispatch(
            "update_memory", '{"existing_key": "living_situation", '
            '"new_value": "She lives with her son now"}', live
        )  # fmt: skip
    assert refused.value.fields == ("new_value",) and "son" not in str(refused.value)
    [kept] = engine.list_memories(MemoryFilter(account_id="acct-1", user_id="u1"))
    assert (kept.id, kept.version) == (memory.id, 1)


def test_dedup_policy_text_threshold(engine: MemoryEngine) -> None:
    existing = [
        engine.store({"account_id": "a", "user_id": "u", "key": "likes_tea",
                      "value": "Loves green tea.", "type": "preference"})
    ]  # fmt: skip
    policy = DedupPolicy(text_threshold=0.9)
    twin = policy.duplicate_of(
        key="likes_tea", value="loves green tea", memory_type=MemoryType.PREFERENCE,
        existing=existing,
    )  # fmt: skip
    assert twin is not None and twin.memory is existing[0]
    assert (
        policy.duplicate_of(
            key="likes_coffee", value="black coffee", memory_type=MemoryType.PREFERENCE,
            existing=existing,
        )
        is None
    )  # fmt: skip
    strict = DedupPolicy(text_threshold=1.0)
    # Keys are compared by vocabulary family ("like_tea" is a likes), so another family differs.
    assert strict.duplicate_of(
        key="dislikes_tea", value="loves green tea", memory_type=MemoryType.PREFERENCE,
        existing=existing,
    ) is None  # fmt: skip
    assert normalise("Loves  GREEN tea!") == "loves green tea"
