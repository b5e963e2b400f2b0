"""Small builders for tests of Confide and of new backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confide.engine import MemoryEngine
from confide.types import Memory, MemoryState, MemoryType, Source, Visibility, utcnow

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


def unstored_memory(
    n: int,
    value: str,
    key: str = "note",
    *,
    account_id: str = ACCOUNT,
    user_id: str = "user-1",
) -> Memory:
    """Memory ``m<n>`` as the engine returns one, never stored: an active private fact,
    version 1, its own lineage, created now. For code that reads memories without a store
    (the same-fact judges, merge groups, labelled pairs)."""
    now = utcnow()
    return Memory(
        id=f"m{n}",
        account_id=account_id,
        user_id=user_id,
        type=MemoryType.FACT,
        key=key,
        value=value,
        confidence=1.0,
        importance=2,
        source=Source.API,
        visibility=Visibility.PRIVATE,
        pinned=False,
        state=MemoryState.ACTIVE,
        version=1,
        lineage_id=f"m{n}",
        created_at=now,
        updated_at=now,
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file, one a line (blank lines skipped): the labelled
    pairs and paraphrases the judges are measured on."""
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
