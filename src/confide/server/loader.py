"""The Realtime adapter's :class:`MemoryLoader` and :class:`DeltaSource` over the engine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from confide.conversation.procedural import in_default_context
from confide.engine import MemoryEngine
from confide.types import Memory, MemoryFilter, MemoryType, category_filter

_DEFAULT_CONTEXT_TYPES = tuple(t for t in MemoryType if t is not MemoryType.PROCEDURAL)
"""Procedural memories reach an agent only when it asks for them (``categories:
["procedural"]`` in ``memory_query``), never in its instructions."""

__all__ = ["EngineMemoryLoader"]


class EngineMemoryLoader:
    """Loads a user's active memories for the agent's instructions, newest first (all but
    procedural ones), and delivers the delta header.

    Args:
        engine: the memory engine.
        limit: at most this many memories.
        on_failure: told when loading fails (the refresh-failure metric), before re-raising.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        limit: int = 200,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self._engine = engine
        self._limit = limit
        self._on_failure = on_failure

    def load_sync(
        self, *, account_id: str, user_id: str, categories: Sequence[str] | None = None
    ) -> list[Memory]:
        """The memories (of ``categories`` only, when given), synchronously."""
        listed = self._engine.list_memories(
            MemoryFilter(
                account_id=account_id,
                user_id=user_id,
                types=_DEFAULT_CONTEXT_TYPES,
                categories=category_filter(categories),
            ),
            limit=self._limit,
        )
        return [m for m in listed if in_default_context(m)]

    async def load(
        self, *, account_id: str, user_id: str, categories: Sequence[str] | None = None
    ) -> Sequence[Memory]:
        """The memories (the :class:`MemoryLoader` method)."""
        try:
            return await asyncio.to_thread(
                self.load_sync, account_id=account_id, user_id=user_id, categories=categories
            )
        except Exception:
            if self._on_failure is not None:
                self._on_failure()
            raise

    async def deliver(
        self,
        *,
        account_id: str,
        user_id: str,
        reader: str,
        categories: Sequence[str] | None = None,
    ) -> str:
        """The delta header ``reader`` has not been shown (the :class:`DeltaSource` method)."""
        return await asyncio.to_thread(
            self._engine.deliver_delta,
            account_id=account_id,
            user_id=user_id,
            reader=reader,
            categories=categories,
        )
