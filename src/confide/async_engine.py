"""An asyncio face for :class:`MemoryEngine`: each call runs in a worker thread.

The engine itself is synchronous (SQLite is in-process, PostgreSQL is reached through a
pool); awaiting it from an event loop must not block the loop, so calls are off-loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from confide.engine import MemoryEngine
from confide.types import (
    ErasureReceipt,
    HistoryEvent,
    Memory,
    MemoryFilter,
    MemoryPatch,
    NewMemory,
)


class AsyncMemoryEngine:
    """Awaitable versions of the engine's main operations."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    async def store(self, new: NewMemory | Mapping[str, Any], **kw: Any) -> Memory:
        """See :meth:`MemoryEngine.store`."""
        return await asyncio.to_thread(self.engine.store, new, **kw)

    async def update(
        self, memory_id: str, patch: MemoryPatch | Mapping[str, Any], **kw: Any
    ) -> Memory:
        """See :meth:`MemoryEngine.update`."""
        return await asyncio.to_thread(self.engine.update, memory_id, patch, **kw)

    async def get(self, memory_id: str, *, account_id: str) -> Memory:
        """See :meth:`MemoryEngine.get`."""
        return await asyncio.to_thread(self.engine.get, memory_id, account_id=account_id)

    async def list_memories(self, flt: MemoryFilter, **kw: Any) -> list[Memory]:
        """See :meth:`MemoryEngine.list_memories`."""
        return await asyncio.to_thread(self.engine.list_memories, flt, **kw)

    async def forget(self, memory_id: str, **kw: Any) -> Memory:
        """See :meth:`MemoryEngine.forget`."""
        return await asyncio.to_thread(self.engine.forget, memory_id, **kw)

    async def restore(self, memory_id: str, **kw: Any) -> Memory:
        """See :meth:`MemoryEngine.restore`."""
        return await asyncio.to_thread(self.engine.restore, memory_id, **kw)

    async def history(self, memory_id: str, *, account_id: str) -> list[HistoryEvent]:
        """See :meth:`MemoryEngine.history`."""
        return await asyncio.to_thread(self.engine.history, memory_id, account_id=account_id)

    async def erase_user(self, *, account_id: str, user_id: str) -> ErasureReceipt:
        """See :meth:`MemoryEngine.erase_user`."""
        return await asyncio.to_thread(
            self.engine.erase_user, account_id=account_id, user_id=user_id
        )
