"""What a memory is found by, and how it looks to the ranker.

One function decides the indexed text so the embedder, the blind lexical index and the
ranker all see the same thing: ``(8 May 2023) Caroline: value``. The date is when the
memory's event happened (``metadata["occurred_at"]``, ISO 8601) or else when it was stored;
the speaker is ``metadata["speaker"]`` when the memory records one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from engram.codec import Contents
from engram.retrieval.indexing import index_text
from engram.retrieval.ranking import Candidate
from engram.storage.base import MemoryRow
from engram.types import Memory


def occurred_at(memory: Memory) -> datetime:
    """When the remembered event happened, falling back to when it was stored."""
    return _occurred_at(memory.metadata, memory.created_at)


def speaker(memory: Memory) -> str | None:
    """Who said it, when the memory records a speaker."""
    return _speaker(memory.metadata)


def _occurred_at(metadata: Mapping[str, Any], stored: datetime) -> datetime:
    raw = metadata.get("occurred_at")
    if isinstance(raw, str):
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            pass
    return stored


def _speaker(metadata: Mapping[str, Any]) -> str | None:
    raw = metadata.get("speaker")
    return raw if isinstance(raw, str) and raw else None


def indexed_text(memory: Memory) -> str:
    """The text the embedder and the lexical index see."""
    return index_text(memory.value, speaker=speaker(memory), when=occurred_at(memory))


def lexical_text(memory: Memory) -> str:
    """The indexed text plus the memory's key as words (``daughter_name`` → ``daughter name``)."""
    return f"{memory.key.replace('_', ' ')} {indexed_text(memory)}"


def row_candidate(
    row: MemoryRow, contents: Contents, *, dense: float | None = None, bm25: float | None = None
) -> Candidate:
    """A ranking candidate from a row and its decrypted contents (no :class:`Memory` built)."""
    return Candidate(
        id=row.id,
        text=contents.value,
        dense=dense,
        bm25=bm25,
        speaker=_speaker(contents.metadata),
        created_at=_occurred_at(contents.metadata, datetime.fromtimestamp(row.created_at, UTC)),
        importance=row.importance,
        pinned=bool(row.pinned),
    )
