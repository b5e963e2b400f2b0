"""System prompts: the agent's instructions, a memory-management section and its memories.

Memories are grouped by type under plain headings so the model can tell a fact from a
follow-up or from how the user has been feeling. The prompt is built in process and handed
to the model; it is never logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from confide.types import Memory, MemoryType

__all__ = ["MEMORY_MANAGEMENT", "build_system_prompt", "format_memories"]

MEMORY_MANAGEMENT = """\
## Memory management
You have a long-term memory of this user. Use it naturally; never recite it as a list.

When to store (call store_memory at once, silently):
- names and what the user likes to be called; family, friends and pets, with names and counts
- where they live; likes and dislikes; work and life history
- living situation, mobility and health details they share
- appointments, visits and plans, with their day and time (type follow_up)
- how they are feeling, sleeping or coping (type wellbeing)

What not to store: small talk, your own words, guesses, anything already listed below,
or anything the user asks you not to remember. Never say you are saving or remembering
something and never confirm storage aloud.

How to update: when the user corrects or changes something you remember, call
update_memory with the existing key and the new value; do not store a second copy.
When they ask you to forget something, call forget_memory; to keep it between you,
call mark_private.

Follow-up reminders: when you store a follow_up, set suggest_reminder if a reminder
would help, and offer it once in your own words. In later conversations, ask how the
appointment or visit went."""

_HEADINGS: tuple[tuple[MemoryType, str], ...] = (
    (MemoryType.FACT, "Facts"),
    (MemoryType.PREFERENCE, "Preferences"),
    (MemoryType.FOLLOW_UP, "Follow-ups (ask about these)"),
    (MemoryType.CONTEXT, "Current context"),
    (MemoryType.HISTORY, "Life history"),
    (MemoryType.WELLBEING, "Wellbeing"),
    (MemoryType.INSIGHT, "Insights"),
    (MemoryType.PROCEDURAL, "How they like things done"),
    (MemoryType.EPISODIC, "Earlier conversations"),
)


def format_memories(memories: Iterable[Memory]) -> str:
    """Memories as Markdown sections by type, ``- key: value`` lines, pinned first."""
    by_type: dict[MemoryType, list[Memory]] = {}
    for memory in memories:
        by_type.setdefault(memory.type, []).append(memory)
    sections: list[str] = []
    for memory_type, heading in _HEADINGS:
        group = by_type.get(memory_type)
        if not group:
            continue
        group.sort(key=lambda m: (not m.pinned, -m.importance, m.key))
        lines = "\n".join(f"- {m.key}: {m.value}" for m in group)
        sections.append(f"### {heading}\n{lines}")
    return "\n\n".join(sections)


def build_system_prompt(
    instructions: str, memories: Sequence[Memory], *, include_management: bool = True
) -> str:
    """The full system prompt: ``instructions``, the memory-management section and the
    user's memories (or a line saying none are known yet)."""
    parts = [instructions.strip()] if instructions.strip() else []
    if include_management:
        parts.append(MEMORY_MANAGEMENT)
    known = format_memories(memories)
    parts.append(
        "## What you remember about this user\n"
        + (known or "Nothing yet: this may be your first conversation.")
    )
    return "\n\n".join(parts)
