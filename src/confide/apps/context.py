"""The system message that hands an app its memories."""

from __future__ import annotations

from collections.abc import Sequence

from confide.apps.scope import MAX_CONTEXT_CHARS, MAX_MEMORY_CHARS, clip
from confide.types import Memory

__all__ = ["CONTEXT_FOOTER", "CONTEXT_INTRO", "render_context"]

CONTEXT_INTRO = "The following are memories from previous conversations with this app:"
CONTEXT_FOOTER = "Use these memories to provide context-aware responses."


def render_context(app_name: str, memories: Sequence[Memory]) -> str:
    """The context text, newest memory first; ``""`` when the app has no memory.

    Exactly::

        (memories for app: {app_name})
        The following are memories from previous conversations with this app:

        1. [Created: YYYY-MM-DD] ...

        Use these memories to provide context-aware responses.

    Each memory is cut to 200 characters; the oldest lines are left out while the whole
    would pass 2,000 characters.
    """
    newest = sorted(memories, key=lambda m: (m.created_at, m.id), reverse=True)
    if not newest:
        return ""
    head = f"(memories for app: {app_name})\n{CONTEXT_INTRO}\n\n"
    tail = f"\n\n{CONTEXT_FOOTER}"
    lines: list[str] = []
    for memory in newest:
        line = (
            f"{len(lines) + 1}. [Created: {memory.created_at.date().isoformat()}] "
            f"{clip(memory.value, MAX_MEMORY_CHARS)}"
        )
        if len(head) + len("\n".join([*lines, line])) + len(tail) > MAX_CONTEXT_CHARS:
            break
        lines.append(line)
    return head + "\n".join(lines) + tail
