"""What a memory is found by, and how it looks to the ranker.

One function decides the indexed text so the embedder, the blind lexical index and the
ranker all see the same thing: ``(8 May 2023) Caroline: value``. The date is when the
memory's event happened (``metadata["occurred_at"]``, ISO 8601) or else when it was stored;
the speaker is ``metadata["speaker"]`` when the memory records one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from confide.types import Memory


def occurred_at(memory: Memory) -> datetime:
    """When the remembered event happened, falling back to when it was stored."""
    return occurred_at_of(memory.metadata, memory.created_at)


def speaker(memory: Memory) -> str | None:
    """Who said it, when the memory records a speaker."""
    return speaker_of(memory.metadata)


def occurred_at_of(metadata: Mapping[str, Any], stored: datetime) -> datetime:
    """``metadata["occurred_at"]`` when it parses as ISO 8601, else ``stored``."""
    raw = metadata.get("occurred_at")
    if isinstance(raw, str):
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            pass
    return stored


def speaker_of(metadata: Mapping[str, Any]) -> str | None:
    """``metadata["speaker"]`` when it is a non-empty string, else None."""
    raw = metadata.get("speaker")
    return raw if isinstance(raw, str) and raw else None


def indexed_text(memory: Memory) -> str:
    """The text the embedder and the lexical index see."""
    return index_text(memory.value, speaker=speaker(memory), when=occurred_at(memory))


def lexical_text(memory: Memory) -> str:
    """The indexed text plus the memory's key as words (``daughter_name`` → ``daughter name``)."""
    return f"{memory.key.replace('_', ' ')} {indexed_text(memory)}"


def index_text(value: str, *, speaker: str | None = None, when: datetime | None = None) -> str:
    """``(8 May 2023) Caroline: value``; either prefix is left out when unknown."""
    text = f"{speaker}: {value}" if speaker else value
    if when is not None:
        text = f"({when.day} {when:%B %Y}) {text}"
    return text


_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)")


def part_spans(indexed: str, value: str, *, min_words: int) -> list[tuple[int, int]]:
    """Character spans, in ``indexed``, of the sentences of ``value`` with ``min_words`` or
    more words, when there are at least two such (a memory of one sentence is its own part).

    ``indexed`` is :func:`index_text` of ``value``, which ends with it; ``min_words`` 0
    gives no parts.
    """
    if min_words <= 0 or not indexed.endswith(value):
        return []
    offset = len(indexed) - len(value)
    spans = [
        (offset + m.start(), offset + m.end())
        for m in _SENTENCE.finditer(value)
        if len(m.group().split()) >= min_words
    ]
    return spans if len(spans) >= 2 else []
