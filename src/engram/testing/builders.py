"""Small builders for tests of Engram and of new backends."""

from __future__ import annotations

from typing import Any

from engram.engine import MemoryEngine
from engram.types import Memory

ACCOUNT = "acct-1"


def add(
    engine: MemoryEngine, key: str = "favorite_color", value: str = "blue", **kw: Any
) -> Memory:
    """Store one memory for ``user-1`` of ``acct-1`` unless told otherwise."""
    fields: dict[str, Any] = {
        "account_id": ACCOUNT,
        "user_id": "user-1",
        "key": key,
        "value": value,
    }
    thread_id = kw.pop("thread_id", None)
    fields.update(kw)
    return engine.store(fields, thread_id=thread_id)
