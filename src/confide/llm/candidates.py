"""What an extractor proposes to remember, before validation and de-duplication."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from confide.types import MemoryType

__all__ = ["EXTRACTABLE_TYPES", "Candidate", "TurnLike"]

# Every memory type an extractor may propose (episodic memories are made elsewhere).
EXTRACTABLE_TYPES: frozenset[MemoryType] = frozenset(MemoryType) - {MemoryType.EPISODIC}


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A memory an extractor proposes: ``type``, snake_case ``key``, short ``value``."""

    type: MemoryType
    key: str
    value: str = field(repr=False)
    confidence: float = 0.7


class TurnLike(Protocol):
    """The part of a conversation turn an extractor reads."""

    @property
    def speaker(self) -> Literal["user", "assistant"]:
        """Who spoke."""
        ...

    @property
    def summary(self) -> str:
        """What was said (at most 500 characters)."""
        ...
