"""The gate: the rules every door's calls pass, enforced once.

Doors (REST routes, the tool routes, the Realtime socket, MCP over stdio and HTTP) turn
their credentials into a :class:`~confide.gate.principal.Principal` and call the gate; the
gate decides what that principal may do and then runs the operation:

- **Scope.** A ``read`` principal changes nothing: the write tools (``store_memory``,
  ``update_memory``, ``forget_memory``, ``mark_private``), a call session (it ends in an
  extraction) and every write by id are refused with :class:`PermissionDeniedError`.
- **Agents.** ``memory_query``, a chat's history and a call's instructions act as an agent
  the principal is bound to, and so carry only the categories of that agent's allowlist.
- **App memories** (owner ``app:<app_id>``, injected into that app's system prompt) are read
  and changed by ``admin`` principals only, whichever operation names their ids.
- **Subject facts** are shared and unshared by their owner only, through the chat memory's
  fact operations (which name the acting user); a change of visibility by id is refused.
- **Stale versions.** An update naming a version that a newer one superseded is a
  :class:`ConflictError` (read the memory again), with or without an expected row version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from confide.chat.facts import FACT_MEMORY_CATEGORY
from confide.conversation.dispatcher import EngineDispatcher, Owner
from confide.conversation.tools import MemoryQueryArgs, parse_arguments
from confide.engine import MemoryEngine
from confide.errors import ConflictError, PermissionDeniedError, PreconditionFailedError
from confide.gate.principal import Principal
from confide.retrieval.categories import CategoriesConfig
from confide.types import (
    APP_OWNER_PREFIX,
    HistoryEvent,
    Memory,
    MemoryFilter,
    MemoryState,
    Source,
)

__all__ = ["WRITE_TOOLS", "Gate"]

WRITE_TOOLS = frozenset({"store_memory", "update_memory", "forget_memory", "mark_private"})
"""The memory tools that change something (a ``read`` principal may call none of them)."""


def require_write(principal: Principal, action: str) -> None:
    """Refuse ``action`` to a principal that may only read.

    Raises:
        PermissionDeniedError: the principal has the ``read`` scope.
    """
    if not principal.may_write:
        raise PermissionDeniedError(f"{action} needs an API key with the service scope")


def require_admin(principal: Principal, action: str) -> None:
    """Refuse ``action`` to a principal without the ``admin`` scope.

    Raises:
        PermissionDeniedError: the principal is not an admin.
    """
    if not principal.is_admin:
        raise PermissionDeniedError(f"{action} needs an API key with the admin scope")


def _check_owner(principal: Principal, owner: str) -> None:
    """App memories belong to the app's admin API."""
    if owner.startswith(APP_OWNER_PREFIX):
        require_admin(principal, "app memories")


class Gate:
    """The operations every door calls, under one principal each.

    Args:
        engine: the memory engine.
        dispatcher: runs the memory tools once the gate has let a call through.
        categories: the categories and agent allowlists.
    """

    def __init__(
        self, engine: MemoryEngine, dispatcher: EngineDispatcher, categories: CategoriesConfig
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.categories = categories

    # ---- agents ---------------------------------------------------------------------------
    def readable(self, principal: Principal, agent: str | None = None) -> tuple[str, ...]:
        """The memory categories that reach ``agent`` (or the principal's first agent)
        unasked: its allowlist, less the categories only an explicit request reads.

        Raises:
            PermissionDeniedError: an agent the principal is not bound to, or one without an
                allowlist.
        """
        return self.categories.resolve(principal.agent_for(agent))

    # ---- memory tools ---------------------------------------------------------------------
    async def call_tool(
        self,
        principal: Principal,
        name: str,
        arguments: BaseModel | Mapping[str, Any] | str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Run memory tool ``name`` for ``principal`` on ``user_id`` (or the pinned user).

        ``arguments`` are the tool's validated arguments, or its raw JSON arguments (a
        mapping or text) to validate here.

        Raises:
            PermissionDeniedError: a write tool for a ``read`` principal, an agent the
                principal is not bound to, another user than the pinned one.
            ValidationError: an unknown tool, invalid arguments, no user.
        """
        if name in WRITE_TOOLS:
            require_write(principal, name)
        args = (
            arguments
            if isinstance(arguments, BaseModel)
            else parse_arguments(
                name, arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
            )
        )
        if isinstance(args, MemoryQueryArgs):
            args = args.model_copy(update={"agent": principal.agent_for(args.agent)})
        owner = Owner(principal.account_id, self.user(principal, user_id), session_id)
        return await self.dispatcher.call(name, args, owner=owner)

    @staticmethod
    def user(principal: Principal, requested: str | None) -> str:
        """The user a call of ``principal`` acts on: the pinned one, or the one it names.

        Raises:
            PermissionDeniedError: another user than the pinned one; an app's owner for a
                non-admin principal.
            ValidationError: no user at all.
        """
        user = principal.acting_user(requested)
        _check_owner(principal, user)
        return user

    def open_call(self, principal: Principal) -> None:
        """Check that ``principal`` may hold a call session (its turns become memories).

        Raises:
            PermissionDeniedError: the principal may only read.
        """
        require_write(principal, "a call session")

    # ---- memories by id -------------------------------------------------------------------
    def get(self, principal: Principal, memory_id: str) -> Memory:
        """One memory version of the principal's account.

        Raises:
            NotFoundError: no such memory in the account.
            PermissionDeniedError: an app memory for a non-admin principal.
        """
        memory = self.engine.get(memory_id, account_id=principal.account_id)
        _check_owner(principal, memory.user_id)
        return memory

    def list_memories(
        self, principal: Principal, flt: MemoryFilter, *, limit: int, offset: int
    ) -> list[Memory]:
        """A user's memories (``flt`` names the user), newest first; an app's owner
        (``app:<app_id>``) lists that app's memories.

        Raises:
            PermissionDeniedError: an app's memories for a non-admin principal.
        """
        update: dict[str, Any] = {"account_id": principal.account_id}
        if flt.user_id is not None:
            _check_owner(principal, flt.user_id)
            if flt.user_id.startswith(APP_OWNER_PREFIX) and flt.app_id is None:
                # An app's owner holds only that app's scope, which a filter without an app
                # leaves out: listing the owner lists the app's memories.
                update["app_id"] = flt.user_id.removeprefix(APP_OWNER_PREFIX)
        scoped = flt.model_copy(update=update)
        return self.engine.list_memories(scoped, limit=limit, offset=offset)

    def history(self, principal: Principal, memory_id: str) -> list[HistoryEvent]:
        """The audit events of every version of a memory, newest first (no values)."""
        self.get(principal, memory_id)
        return self.engine.history(memory_id, account_id=principal.account_id)

    def store(self, principal: Principal, fields: Mapping[str, Any], *, actor: str) -> Memory:
        """Store a memory in the principal's account exactly as given (no de-duplication).

        Raises:
            PermissionDeniedError: a ``read`` principal, or an app owner for a non-admin.
            ValidationError: invalid fields.
        """
        require_write(principal, "storing a memory")
        owner = fields.get("user_id")
        if isinstance(owner, str):
            _check_owner(principal, owner)
        return self.engine.store(
            {**fields, "account_id": principal.account_id, "source": Source.API}, actor=actor
        )

    def update(
        self,
        principal: Principal,
        memory_id: str,
        patch: Mapping[str, Any],
        *,
        actor: str,
        expected_row_version: int | None = None,
    ) -> Memory:
        """Write a new version of the memory with ``patch`` applied.

        Raises:
            PermissionDeniedError: a ``read`` principal; an app memory for a non-admin; a
                subject fact's visibility (its owner changes it through the fact operations).
            ConflictError: ``memory_id`` is a version a newer one superseded, or the memory
                is forgotten; :class:`PreconditionFailedError` when the expected row version
                is not the current one.
            NotFoundError: no such memory in the account.
        """
        require_write(principal, "updating a memory")
        memory = self.get(principal, memory_id)
        if "visibility" in patch and memory.category == FACT_MEMORY_CATEGORY:
            raise PermissionDeniedError(
                "only a subject fact's owner may share or unshare it (the facts API names them)"
            )
        if expected_row_version is None and memory.state == MemoryState.SUPERSEDED:
            raise ConflictError(f"memory {memory_id} was superseded; read it again and retry")
        try:
            # The version read above is the one compared, so a writer that supersedes it
            # meanwhile fails this update instead of being overwritten.
            return self.engine.update(
                memory_id,
                patch,
                account_id=principal.account_id,
                actor=actor,
                expected_row_version=(
                    memory.row_version if expected_row_version is None else expected_row_version
                ),
            )
        except PreconditionFailedError:
            if expected_row_version is not None:
                raise
            raise ConflictError(
                f"memory {memory_id} changed meanwhile; read it again and retry"
            ) from None

    def forget(self, principal: Principal, memory_id: str, *, actor: str) -> Memory:
        """Soft-delete a memory (restorable until purged)."""
        require_write(principal, "forgetting a memory")
        self.get(principal, memory_id)
        return self.engine.forget(memory_id, account_id=principal.account_id, actor=actor)

    def restore(self, principal: Principal, memory_id: str, *, actor: str) -> Memory:
        """Bring a forgotten memory back."""
        require_write(principal, "restoring a memory")
        self.get(principal, memory_id)
        return self.engine.restore(memory_id, account_id=principal.account_id, actor=actor)

    # ---- users ----------------------------------------------------------------------------
    def export_user(self, principal: Principal, user_id: str) -> dict[str, Any]:
        """Everything ``user_id`` owns in the principal's account, decrypted.

        Raises:
            PermissionDeniedError: an app owner for a non-admin principal.
        """
        _check_owner(principal, user_id)
        return self.engine.export_user(account_id=principal.account_id, user_id=user_id)
