"""The gate for asyncio doors: every operation awaitable, its storage work off the loop.

The engine and the gate are synchronous (SQLite is in-process, PostgreSQL is reached
through a pool). An async door (the HTTP routes, the Realtime socket, MCP) awaits
:class:`AsyncGate` instead of off-loading each call itself, so the one place that decides
what runs in a worker thread is here; the service tests fail any request that touches the
store on the event loop (``confide.testing.loop_guard``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from confide.gate.gate import Gate
from confide.gate.principal import Principal
from confide.types import HistoryEvent, Memory, MemoryFilter

__all__ = ["AsyncGate"]


class AsyncGate:
    """Awaitable versions of every :class:`Gate` operation (same arguments, same errors)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def readable(self, principal: Principal, agent: str | None = None) -> tuple[str, ...]:
        """See :meth:`Gate.readable`."""
        return self.gate.readable(principal, agent)  # configuration only: no storage

    async def agent_view(
        self, principal: Principal, *, user_id: str | None, agent: str | None = None
    ) -> MemoryFilter:
        """See :meth:`Gate.agent_view`."""
        return self.gate.agent_view(principal, user_id=user_id, agent=agent)

    async def memories_for(
        self, principal: Principal, *, user_id: str | None, agent: str | None = None, limit: int
    ) -> list[Memory]:
        """See :meth:`Gate.memories_for`."""
        return await asyncio.to_thread(
            self.gate.memories_for, principal, user_id=user_id, agent=agent, limit=limit
        )

    async def memory_by_key(
        self, principal: Principal, *, user_id: str | None, key: str, agent: str | None = None
    ) -> Memory | None:
        """See :meth:`Gate.memory_by_key`."""
        return await asyncio.to_thread(
            self.gate.memory_by_key, principal, user_id=user_id, key=key, agent=agent
        )

    async def call_tool(
        self,
        principal: Principal,
        name: str,
        arguments: BaseModel | Mapping[str, Any] | str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """See :meth:`Gate.call_tool` (the dispatcher off-loads its own storage work)."""
        return await self.gate.call_tool(
            principal, name, arguments, user_id=user_id, session_id=session_id
        )

    async def user(self, principal: Principal, requested: str | None) -> str:
        """See :meth:`Gate.user`."""
        return self.gate.user(principal, requested)

    async def open_call(self, principal: Principal) -> None:
        """See :meth:`Gate.open_call`."""
        self.gate.open_call(principal)

    async def get(self, principal: Principal, memory_id: str) -> Memory:
        """See :meth:`Gate.get`."""
        return await asyncio.to_thread(self.gate.get, principal, memory_id)

    async def list_memories(
        self, principal: Principal, flt: MemoryFilter, *, limit: int, offset: int
    ) -> list[Memory]:
        """See :meth:`Gate.list_memories`."""
        return await asyncio.to_thread(
            self.gate.list_memories, principal, flt, limit=limit, offset=offset
        )

    async def history(self, principal: Principal, memory_id: str) -> list[HistoryEvent]:
        """See :meth:`Gate.history`."""
        return await asyncio.to_thread(self.gate.history, principal, memory_id)

    async def store(self, principal: Principal, fields: Mapping[str, Any], *, actor: str) -> Memory:
        """See :meth:`Gate.store`."""
        return await asyncio.to_thread(self.gate.store, principal, fields, actor=actor)

    async def update(
        self,
        principal: Principal,
        memory_id: str,
        patch: Mapping[str, Any],
        *,
        actor: str,
        expected_row_version: int | None = None,
    ) -> Memory:
        """See :meth:`Gate.update`."""
        return await asyncio.to_thread(
            self.gate.update,
            principal,
            memory_id,
            patch,
            actor=actor,
            expected_row_version=expected_row_version,
        )

    async def forget(self, principal: Principal, memory_id: str, *, actor: str) -> Memory:
        """See :meth:`Gate.forget`."""
        return await asyncio.to_thread(self.gate.forget, principal, memory_id, actor=actor)

    async def restore(self, principal: Principal, memory_id: str, *, actor: str) -> Memory:
        """See :meth:`Gate.restore`."""
        return await asyncio.to_thread(self.gate.restore, principal, memory_id, actor=actor)

    async def export_user(self, principal: Principal, user_id: str) -> dict[str, Any]:
        """See :meth:`Gate.export_user`."""
        return await asyncio.to_thread(self.gate.export_user, principal, user_id)
