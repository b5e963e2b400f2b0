"""The tool dispatcher: runs the agent's memory tools against the engine.

:class:`EngineDispatcher` implements the Realtime adapter's :class:`Dispatcher` protocol
(``dispatch(name, arguments_json, session)``) and offers :meth:`EngineDispatcher.call` for
the HTTP routes, which validate their own bodies. The engine is synchronous, so each call
runs in a worker thread. Writes pass the de-duplication policy and consent
(:mod:`confide.conversation.consent`): a tool call is a live write, made on what the user says
in the conversation, so it applies at once, whatever its key and confidence, and settles the
key's pending proposals (confirming one with the same value, superseding the others). One
that an inference could not have made alone (a sensitive key, or a benign one with fewer than
two signals) is audited as consented in the conversation (actor
:data:`~confide.conversation.consent.CONSENTED_IN_CONVERSATION`, operational status
``consented``). Results use the voice bridge's camelCase shape: ``{success, memoryId,
action?, suggestReminder?, message?}``. Nothing here logs a
value or an argument. Each write, duplicate and forget is an operational event of node
``hotpath`` (``create``, ``update``, ``merge`` for a duplicate folded into the memory it
repeats, with the similarity that found it as ``sim``, ``delete``); a query's ``search``
event is recorded by the query service the handler runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from confide.conversation.buffer import Session
from confide.conversation.consent import (
    CONSENTED_IN_CONVERSATION,
    DEFAULT_SENSITIVE_KEYS,
    ConsentPolicy,
)
from confide.conversation.dedup import DedupPolicy, normalise
from confide.conversation.procedural import ProceduralGate
from confide.conversation.proposals import ProposalStore
from confide.conversation.tools import (
    ForgetMemoryArgs,
    MarkPrivateArgs,
    MemoryHistoryArgs,
    MemoryQueryArgs,
    StoreMemoryArgs,
    UpdateMemoryArgs,
    parse_arguments,
    reminder_offer,
)
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, ValidationError
from confide.types import Memory, MemoryType, NewMemory, Source, validated

__all__ = ["EngineDispatcher", "Owner", "QueryHandler", "ToolCallLog"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose memory a tool call acts on, and in which call session."""

    account_id: str
    user_id: str
    session_id: str | None = None


class ToolCallLog(Protocol):
    """Where tool calls are recorded as session events (``ServiceTables`` in the service)."""

    def add_tool_call(
        self,
        session_id: str,
        *,
        account_id: str,
        tool: str,
        memory_id: str | None,
        key: str | None,
        memory_type: str | None,
        ts: float,
    ) -> None:
        """Record one tool call (ids, blinded key and type only)."""
        ...


class QueryHandler(Protocol):
    """Answers ``memory_query`` (the retrieval layer plugs in here)."""

    async def __call__(self, args: MemoryQueryArgs, *, owner: Owner) -> dict[str, Any]:
        """Run the query for ``owner`` and return a JSON-able answer."""
        ...


WriteHook = Callable[[str], None]
"""Called with ``"created"`` or ``"updated"`` after each memory write (for metrics)."""


class EngineDispatcher:
    """Runs ``store_memory``, ``update_memory``, ``forget_memory``, ``mark_private``,
    ``memory_query`` and ``memory_history`` (the audit events of a memory, no values) for one
    user at a time.

    Args:
        engine: the memory engine.
        dedup: the write-time de-duplication policy.
        proposals: pending proposals, settled by the live writes of their keys.
        sensitive_keys: keys whose live writes are audited as consented in the conversation.
        tool_log: records each call as a session event (when the call has a session).
        on_write: told about each memory created or updated.
        query: the ``memory_query`` handler; without one the tool answers with an error.
        procedural: what a write typed ``procedural`` becomes (numbered steps, or a
            preference; see :mod:`confide.conversation.procedural`).
        consent: the consent policy (overrides ``sensitive_keys``).
        user_turns: the user's own turns of a call session (for the ``heard`` signal).
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        dedup: DedupPolicy | None = None,
        proposals: ProposalStore | None = None,
        sensitive_keys: Collection[str] = DEFAULT_SENSITIVE_KEYS,
        tool_log: ToolCallLog | None = None,
        on_write: WriteHook | None = None,
        query: QueryHandler | None = None,
        procedural: ProceduralGate | None = None,
        consent: ConsentPolicy | None = None,
        user_turns: Callable[[str], Sequence[str]] | None = None,
    ) -> None:
        self._engine = engine
        self._procedural = procedural or ProceduralGate()
        self._dedup = dedup or DedupPolicy()
        self._proposals = proposals
        self._consent = consent or ConsentPolicy.of(sensitive_keys)
        self._user_turns = user_turns
        self._tool_log = tool_log
        self._on_write = on_write
        self.query = query

    async def dispatch(self, name: str, arguments_json: str, session: Session) -> dict[str, Any]:
        """Run tool ``name`` for the session's user (the Realtime :class:`Dispatcher`).

        Raises:
            ValidationError: unknown tool or invalid arguments.
            NotFoundError: the memory to forget or mark private does not exist.
        """
        args = parse_arguments(name, arguments_json)
        owner = Owner(session.account_id, session.user_id, session.session_id)
        return await self.call(name, args, owner=owner)

    async def call(self, name: str, args: BaseModel, *, owner: Owner) -> dict[str, Any]:
        """Run a tool with validated arguments for ``owner``."""
        if isinstance(args, MemoryQueryArgs):
            if self.query is None:
                raise ValidationError("memory_query is not available on this server")
            # Its operational event (with the similarity) is the query service's.
            return await self.query(args, owner=owner)
        return await asyncio.to_thread(self._run, name, args, owner)

    # ---- synchronous bodies (worker thread) -------------------------------------------------
    def _run(self, name: str, args: BaseModel, owner: Owner) -> dict[str, Any]:
        memory: Memory | None
        if name == "store_memory" and isinstance(args, StoreMemoryArgs):
            result, memory = self._store(args, owner)
            logged = (args.key, args.memory_type.value)
        elif name == "update_memory" and isinstance(args, UpdateMemoryArgs):
            result, memory = self._update(args, owner)
            kind = args.memory_type or MemoryType.FACT
            logged = (args.existing_key, kind.value)
        elif name == "forget_memory" and isinstance(args, ForgetMemoryArgs):
            memory = self._target(args, owner)
            memory = self._engine.forget(memory.id, account_id=owner.account_id, actor="agent")
            self._op("delete", owner, memory)
            result = {"success": True, "memoryId": memory.id, "action": "forgotten"}
            logged = (memory.key, memory.type.value)
        elif name == "mark_private" and isinstance(args, MarkPrivateArgs):
            memory = self._target(args, owner)
            memory = self._engine.mark_private(
                memory.id, account_id=owner.account_id, actor="agent"
            )
            result = {"success": True, "memoryId": memory.id, "action": "private"}
            logged = (memory.key, memory.type.value)
        elif name == "memory_history" and isinstance(args, MemoryHistoryArgs):
            memory = self._target(args, owner)
            events = self._engine.history(memory.id, account_id=owner.account_id)
            # Ids, event kinds, actors and times: an audit event never carries a value.
            history = [
                {
                    "event": e.event.value,
                    "memoryId": e.memory_id,
                    "oldRef": e.old_ref,
                    "newRef": e.new_ref,
                    "actor": e.actor,
                    "ts": e.ts.isoformat(),
                }
                for e in events
            ]
            return {"success": True, "memoryId": memory.id, "history": history}
        else:
            raise ValidationError(f"unknown tool {name!r}")
        if self._tool_log is not None and owner.session_id is not None:
            key, kind_name = (memory.key, memory.type.value) if memory is not None else logged
            self._tool_log.add_tool_call(
                owner.session_id,
                account_id=owner.account_id,
                tool=name,
                memory_id=None if memory is None else memory.id,
                key=self._engine.blind_key(owner.account_id, key),
                memory_type=kind_name,
                ts=time.time(),
            )
        return result

    def _store(self, args: StoreMemoryArgs, owner: Owner) -> tuple[dict[str, Any], Memory | None]:
        memory, action = self._write(
            owner,
            key=args.key,
            value=args.value,
            memory_type=args.memory_type,
            confidence=args.confidence,
        )
        result = _answer(memory, action)
        if args.memory_type == MemoryType.FOLLOW_UP and args.suggest_reminder:
            result["suggestReminder"] = True
            result["message"] = reminder_offer(args.value)
        return result, memory

    def _update(self, args: UpdateMemoryArgs, owner: Owner) -> tuple[dict[str, Any], Memory | None]:
        memory, action = self._write(
            owner,
            key=args.existing_key,
            value=args.new_value,
            memory_type=args.memory_type,
            confidence=args.confidence,
        )
        action = "created" if action == "created" else "updated"
        return _answer(memory, action), memory

    def _write(
        self,
        owner: Owner,
        *,
        key: str,
        value: str,
        memory_type: MemoryType | None,
        confidence: float | None,
    ) -> tuple[Memory, str]:
        """Create, update or (as a duplicate) skip, then settle the key's pending proposals;
        return the memory (the new version, or the one it repeats) and the action."""
        sure = 1.0 if confidence is None else confidence
        if memory_type == MemoryType.PROCEDURAL:
            # A tool call is a detection: a procedure only with high confidence, as steps.
            memory_type, value = self._procedural.admit(
                value=value, confidence=sure, explicit=False
            )
        current = self._engine.get_by_key(
            account_id=owner.account_id, user_id=owner.user_id, key=key
        )
        if current is not None:
            key = current.key  # the stored spelling
        elif self._consent.is_sensitive(key):
            key = key.lower()  # a sensitive key's canonical spelling, as proposals hold it
        memory, action = self._apply(owner, key, value, memory_type, confidence, sure, current)
        if self._proposals is not None:
            # The user stated the key in the conversation: a pending proposal holding the
            # same value is confirmed, any other superseded.
            self._proposals.settle_by_live_write(
                account_id=owner.account_id, user_id=owner.user_id, key=key, value=value
            )
        return memory, action

    def _apply(
        self,
        owner: Owner,
        key: str,
        value: str,
        memory_type: MemoryType | None,
        confidence: float | None,
        sure: float,
        current: Memory | None,
    ) -> tuple[Memory, str]:
        if current is not None and (
            normalise(current.value) == normalise(value)
            and (memory_type is None or memory_type == current.type)
        ):
            self._op("merge", owner, current, status="unchanged", sim=1.0)
            return current, "unchanged"
        # A live write applies at once; one that would have waited had it been inferred is
        # audited as consented in the conversation (see :mod:`confide.conversation.consent`).
        consented = self._needs_consent(owner, key, value, sure)
        actor = CONSENTED_IN_CONVERSATION if consented else "agent"
        status = "consented" if consented else "ok"
        if current is not None:
            memory, _ = self._engine.update_by_key(
                account_id=owner.account_id,
                user_id=owner.user_id,
                key=key,
                value=value,
                type=memory_type,
                confidence=confidence,
                source=Source.TOOL,
                actor=actor,
            )
            self._notify("updated")
            self._op("update", owner, memory, status=status)
            return memory, "updated"
        kind = memory_type or MemoryType.FACT
        twin = self._dedup.find_duplicate(
            self._engine,
            account_id=owner.account_id,
            user_id=owner.user_id,
            key=key,
            value=value,
            memory_type=kind,
        )
        if twin is not None:
            log.info("tool write skipped as a duplicate")
            self._op("merge", owner, twin.memory, status="duplicate", sim=twin.similarity)
            return twin.memory, "duplicate"
        new = validated(
            NewMemory,
            {
                "account_id": owner.account_id,
                "user_id": owner.user_id,
                "key": key,
                "value": value,
                "type": kind,
                "confidence": sure,
                "source": Source.TOOL,
                "metadata": {"session_id": owner.session_id} if owner.session_id else {},
            },
        )
        memory = self._engine.store(new, actor=actor)
        self._notify("created")
        self._op("create", owner, memory, status=status)
        return memory, "created"

    def _needs_consent(self, owner: Owner, key: str, value: str, confidence: float) -> bool:
        """Whether the write would have waited for the user had it been inferred: a
        sensitive key, or a benign one fewer than two signals corroborate."""
        if self._consent.is_sensitive(key):
            return True
        turns = (
            self._user_turns(owner.session_id)
            if self._user_turns is not None and owner.session_id is not None
            else ()
        )
        pending_same = self._proposals is not None and self._proposals.has_pending_value(
            account_id=owner.account_id, user_id=owner.user_id, key=key, value=value
        )
        signals = self._consent.signals(
            value=value,
            confidence=confidence,
            live=True,
            user_turns=turns,
            pending_same=pending_same,
        )
        return not self._consent.corroborated(signals)

    def _target(
        self, args: ForgetMemoryArgs | MarkPrivateArgs | MemoryHistoryArgs, owner: Owner
    ) -> Memory:
        if args.memory_id:
            memory = self._engine.get(args.memory_id, account_id=owner.account_id)
            if memory.user_id != owner.user_id:
                raise NotFoundError("memory not found")
            return memory
        found = self._engine.get_by_key(
            account_id=owner.account_id, user_id=owner.user_id, key=str(args.key)
        )
        if found is None:
            raise NotFoundError("no active memory has this key")
        return found

    def _op(
        self,
        op: str,
        owner: Owner,
        memory: Memory | None,
        *,
        status: str = "ok",
        sim: float | None = None,
    ) -> None:
        self._engine.emit_op(
            "hotpath",
            op,
            account_id=owner.account_id,
            user_id=owner.user_id,
            status=status,
            memory_id=None if memory is None else memory.id,
            category=None if memory is None else (memory.category or memory.type.value),
            sim=sim,
        )

    def _notify(self, action: str) -> None:
        if self._on_write is not None:
            self._on_write(action)


def _answer(memory: Memory, action: str) -> dict[str, Any]:
    """A write's answer: the memory written (or the one it repeats) and what was done."""
    return {"success": True, "memoryId": memory.id, "action": action}
