"""What gets indexed for a memory: its value with the speaker and date in front.

The same string feeds the embedder and the BM25 terms, so a question naming a person or a
date meets the memories that carry them. Ranking features (time expressions, entities) look
at the bare value instead, where a date prefix would make every memory look temporal.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["index_text"]


def index_text(value: str, *, speaker: str | None = None, when: datetime | None = None) -> str:
    """``(8 May 2023) Caroline: value``; either prefix is left out when unknown."""
    text = f"{speaker}: {value}" if speaker else value
    if when is not None:
        text = f"({when.day} {when:%B %Y}) {text}"
    return text
