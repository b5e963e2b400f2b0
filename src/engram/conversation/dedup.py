"""Write-time de-duplication: a new memory nearly identical to an active one is not stored twice.

Two tests, either is enough:

* normalised text: lower-cased, punctuation dropped, whitespace collapsed; the similarity
  (difflib's ratio) of ``"key words: value"`` must reach ``text_threshold``;
* meaning, when an embedder is configured: the cosine of the two ``key: value`` embeddings
  must reach ``cosine_threshold``.

A memory of another type never counts as a duplicate unless the keys match too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Protocol

import numpy as np

from engram.types import Memory, MemoryType

__all__ = ["DedupPolicy", "TextEmbedder", "normalise"]

_NON_WORD = re.compile(r"[^\w\s]+")


class TextEmbedder(Protocol):
    """The part of :class:`engram.retrieval.Embedder` the policy needs."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised vectors, one row per text."""
        ...


def normalise(text: str) -> str:
    """Lower-case, drop punctuation, turn ``_`` into spaces and collapse whitespace."""
    return " ".join(_NON_WORD.sub(" ", text.replace("_", " ").lower()).split())


def _text(key: str, value: str) -> str:
    return f"{normalise(key)}: {normalise(value)}"


@dataclass(frozen=True, kw_only=True)
class DedupPolicy:
    """Decides whether a new memory duplicates one of the user's active memories.

    Args:
        text_threshold: minimum normalised-text similarity (0..1) of ``key: value``.
        cosine_threshold: minimum embedding cosine, used only with an ``embedder``.
        embedder: optional; without one only the text test runs.
    """

    text_threshold: float = 0.92
    cosine_threshold: float = 0.95
    embedder: TextEmbedder | None = None

    def duplicate_of(
        self, *, key: str, value: str, memory_type: MemoryType, existing: Sequence[Memory]
    ) -> Memory | None:
        """The active memory the new one duplicates, or ``None``."""
        candidates = [m for m in existing if m.type == memory_type or m.key.lower() == key.lower()]
        if not candidates:
            return None
        new_text = _text(key, value)
        for memory in candidates:
            old_text = _text(memory.key, memory.value)
            if new_text == old_text:
                return memory
            if SequenceMatcher(None, new_text, old_text).ratio() >= self.text_threshold:
                return memory
        if self.embedder is None:
            return None
        vectors = self.embedder.embed([new_text, *(_text(m.key, m.value) for m in candidates)])
        scores = np.asarray(vectors[1:]) @ np.asarray(vectors[0])
        best = int(np.argmax(scores))
        return candidates[best] if float(scores[best]) >= self.cosine_threshold else None
