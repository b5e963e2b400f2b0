"""System prompt building."""

from __future__ import annotations

from datetime import UTC, datetime

from confide.conversation.prompts import build_system_prompt, format_memories
from confide.types import Memory, MemoryState, MemoryType, Source, Visibility

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def memory(key: str, value: str, memory_type: MemoryType, *, pinned: bool = False) -> Memory:
    return Memory(
        id=key, account_id="a", user_id="u", type=memory_type, key=key, value=value,
        confidence=1.0, importance=2, source=Source.TOOL, visibility=Visibility.PRIVATE,
        pinned=pinned, state=MemoryState.ACTIVE, version=1, lineage_id=key,
        created_at=T0, updated_at=T0,
    )  # fmt: skip


def test_memories_grouped_by_type_in_fixed_order() -> None:
    text = format_memories(
        [
            memory("mood", "feels lonely", MemoryType.WELLBEING),
            memory("city", "Portland", MemoryType.FACT),
            memory("name", "Margaret", MemoryType.FACT, pinned=True),
            memory("current_location", "at the hospital", MemoryType.CONTEXT),
            memory("former_occupation", "nurse", MemoryType.HISTORY),
        ]
    )
    assert text.split("\n\n") == [
        "### Facts\n- name: Margaret\n- city: Portland",
        "### Current context\n- current_location: at the hospital",
        "### Life history\n- former_occupation: nurse",
        "### Wellbeing\n- mood: feels lonely",
    ]


def test_prompt_has_instructions_management_and_memories() -> None:
    prompt = build_system_prompt("You are Ava.", [memory("city", "Portland", MemoryType.FACT)])
    assert prompt.startswith("You are Ava.")
    for phrase in ("When to store", "What not to store", "How to update", "Follow-up reminders"):
        assert phrase in prompt
    assert "never confirm storage aloud" in prompt.replace("\n", " ")
    assert prompt.endswith("### Facts\n- city: Portland")


def test_prompt_without_memories() -> None:
    prompt = build_system_prompt("", [], include_management=False)
    assert prompt.startswith("## What you remember") and "Nothing yet" in prompt
