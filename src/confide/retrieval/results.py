"""``SearchResult``: one ranked answer of ``search``, shared by the embedded and remote SDKs."""

from __future__ import annotations

from dataclasses import dataclass

from confide.types import Memory

__all__ = ["SearchResult"]


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """One ranked answer of :meth:`Confide.search`.

    ``score`` is the ranking score (higher is better); ``similarity`` the cosine similarity
    to the question, ``None`` without an embedder or for a memory found only by its words.
    """

    memory: Memory
    score: float
    similarity: float | None
