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

from confide.apps import AppSettings
from confide.chat import ConversationHistory, MemoryContext, MessagePage, SavedMessage
from confide.chat.prompt import Delivery
from confide.chat.types import SubjectFact
from confide.conversation.proposals import Proposal
from confide.gate.gate import Gate
from confide.gate.principal import Principal
from confide.types import ErasureReceipt, HistoryEvent, Memory, MemoryFilter, ScrubReport

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

    async def current(self, principal: Principal, memory_id: str) -> Memory:
        """See :meth:`Gate.current`."""
        return await asyncio.to_thread(self.gate.current, principal, memory_id)

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

    async def user_ids(self, principal: Principal) -> list[str]:
        """See :meth:`Gate.user_ids`."""
        return await asyncio.to_thread(self.gate.user_ids, principal)

    async def erase_user(self, principal: Principal, user_id: str) -> ErasureReceipt:
        """See :meth:`Gate.erase_user`."""
        return await asyncio.to_thread(self.gate.erase_user, principal, user_id)

    async def erasure(self, principal: Principal, erasure_id: str) -> ScrubReport:
        """See :meth:`Gate.erasure`."""
        return await asyncio.to_thread(self.gate.erasure, principal, erasure_id)

    async def add_message(self, principal: Principal, fields: Mapping[str, Any]) -> SavedMessage:
        """See :meth:`Gate.add_message`."""
        return await asyncio.to_thread(self.gate.add_message, principal, fields)

    async def list_messages(
        self,
        principal: Principal,
        *,
        user_id: str | None,
        conversation_id: str,
        cursor: int | None = None,
        limit: int = 50,
    ) -> MessagePage:
        """See :meth:`Gate.list_messages`."""
        return await asyncio.to_thread(
            self.gate.list_messages,
            principal,
            user_id=user_id,
            conversation_id=conversation_id,
            cursor=cursor,
            limit=limit,
        )

    async def retrieve(
        self,
        principal: Principal,
        text: str,
        *,
        user_id: str | None,
        conversation_id: str,
        channel: str | None = None,
        agent: str | None = None,
    ) -> ConversationHistory:
        """See :meth:`Gate.retrieve`."""
        return await asyncio.to_thread(
            self.gate.retrieve,
            principal,
            text,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            agent=agent,
        )

    async def memory_context(
        self,
        principal: Principal,
        text: str,
        *,
        user_id: str | None,
        conversation_id: str,
        channel: str | None = None,
        agent: str | None = None,
    ) -> MemoryContext:
        """See :meth:`Gate.memory_context`."""
        return await asyncio.to_thread(
            self.gate.memory_context,
            principal,
            text,
            user_id=user_id,
            conversation_id=conversation_id,
            channel=channel,
            agent=agent,
        )

    async def deliver(
        self,
        principal: Principal,
        agent: str | None,
        text: str,
        *,
        user_id: str | None,
        conversation_id: str | None = None,
        subject_id: str | None = None,
        channel: str | None = None,
    ) -> Delivery:
        """See :meth:`Gate.deliver`."""
        return await asyncio.to_thread(
            self.gate.deliver,
            principal,
            agent,
            text,
            user_id=user_id,
            conversation_id=conversation_id,
            subject_id=subject_id,
            channel=channel,
        )

    async def subject_facts(
        self, principal: Principal, *, user_id: str | None, subject_id: str
    ) -> list[SubjectFact]:
        """See :meth:`Gate.subject_facts`."""
        return await asyncio.to_thread(
            self.gate.subject_facts, principal, user_id=user_id, subject_id=subject_id
        )

    async def set_fact_visibility(
        self, principal: Principal, *, user_id: str | None, fact_id: str, visibility: str
    ) -> SubjectFact:
        """See :meth:`Gate.set_fact_visibility`."""
        return await asyncio.to_thread(
            self.gate.set_fact_visibility,
            principal,
            user_id=user_id,
            fact_id=fact_id,
            visibility=visibility,
        )

    async def delete_fact(self, principal: Principal, *, user_id: str | None, fact_id: str) -> None:
        """See :meth:`Gate.delete_fact`."""
        await asyncio.to_thread(self.gate.delete_fact, principal, user_id=user_id, fact_id=fact_id)

    async def app_context(self, principal: Principal, app_id: str) -> str:
        """See :meth:`Gate.app_context`."""
        return await asyncio.to_thread(self.gate.app_context, principal, app_id)

    async def open_app_end(self, principal: Principal, user_id: str | None = None) -> str | None:
        """See :meth:`Gate.open_app_end`."""
        return self.gate.open_app_end(principal, user_id)

    async def configure_app(
        self, principal: Principal, app_id: str, *, name: str | None, memory_cap: int | None
    ) -> AppSettings:
        """See :meth:`Gate.configure_app`."""
        return await asyncio.to_thread(
            self.gate.configure_app, principal, app_id, name=name, memory_cap=memory_cap
        )

    async def uninstall_app(
        self, principal: Principal, app_id: str, *, purge: bool = False
    ) -> ErasureReceipt | None:
        """See :meth:`Gate.uninstall_app`."""
        return await asyncio.to_thread(self.gate.uninstall_app, principal, app_id, purge=purge)

    async def app_memories(self, principal: Principal, app_id: str) -> list[Memory]:
        """See :meth:`Gate.app_memories`."""
        return await asyncio.to_thread(self.gate.app_memories, principal, app_id)

    async def delete_app_memories(self, principal: Principal, app_id: str) -> int:
        """See :meth:`Gate.delete_app_memories`."""
        return await asyncio.to_thread(self.gate.delete_app_memories, principal, app_id)

    async def delete_app_memory(self, principal: Principal, app_id: str, memory_id: str) -> None:
        """See :meth:`Gate.delete_app_memory`."""
        await asyncio.to_thread(self.gate.delete_app_memory, principal, app_id, memory_id)

    async def pending_proposals(self, principal: Principal, user_id: str | None) -> list[Proposal]:
        """See :meth:`Gate.pending_proposals`."""
        return await asyncio.to_thread(self.gate.pending_proposals, principal, user_id)

    async def confirm_proposal(self, principal: Principal, proposal_id: str) -> Memory:
        """See :meth:`Gate.confirm_proposal`."""
        return await asyncio.to_thread(self.gate.confirm_proposal, principal, proposal_id)

    async def reject_proposal(self, principal: Principal, proposal_id: str) -> None:
        """See :meth:`Gate.reject_proposal`."""
        await asyncio.to_thread(self.gate.reject_proposal, principal, proposal_id)
