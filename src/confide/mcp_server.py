"""``confide mcp``: the agent's memory tools over the Model Context Protocol.

:func:`create_mcp_server` builds an MCP server (the official ``mcp`` SDK's ``MCPServer``)
whose tools run through the service's :class:`~confide.conversation.dispatcher.EngineDispatcher`,
so ``store_memory``, ``update_memory``, ``forget_memory``, ``mark_private``, ``memory_query``
and ``memory_history`` behave and fail exactly as they do for voice bridges. The resource
``confide://users/{user_id}/memories`` lists a user's active memories.

Whose memory a call touches is never taken from a tool argument alone:

- **stdio** (``confide mcp``): the account, and optionally the user and agent, come from the
  command line (the operator's configuration).
- **streamable HTTP** (``confide mcp --http``): every request carries a bearer API key, the
  same keys as the REST service (``confide keys create``), verified against the database on
  each request. The account is the key's and the agent must be one the key is bound to.

A tool's ``user_id`` argument names the user within that account; when the server is
configured with a user, a different ``user_id`` is refused. Tool failures come back as MCP
tool errors whose text is ``<ErrorClass>: <message>`` from Confide's exception tree; nothing
logs a value or an argument.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from confide.client import Confide
from confide.conversation.tools import EXTRACTABLE_TYPE_NAMES, realtime_tools
from confide.errors import ConfideError, MissingDependencyError, PermissionDeniedError
from confide.errors import ValidationError as ConfideValidationError
from confide.gate import Principal, Scope
from confide.server.auth import ApiKeys
from confide.server.services import Services

__all__ = ["McpScope", "create_mcp_server", "mcp_http_app"]

_RESOURCE = "confide://users/{user_id}/memories"
_LIST_LIMIT = 1000
_HISTORY_DESCRIPTION = (
    "The audit history of one memory, newest first: what happened to it (added, updated, "
    "forgotten, restored, made private), by whom and when. Never the values. Give its key or "
    "its memory_id."
)
_USER_ID_PROPERTY = (
    "The user whose memory this is, within the caller's account (optional when the server "
    "is configured with a user)."
)


@dataclass(frozen=True, kw_only=True)
class McpScope:
    """The scope an MCP server was configured with.

    ``account_id`` is required over stdio and optional over HTTP (the key's account then
    decides; a key of another account is refused). ``user_id`` pins every call to one user.
    ``agent`` is the agent a stdio caller acts as (HTTP callers act as their key's agents).
    """

    account_id: str | None = None
    user_id: str | None = None
    agent: str = "default"


def _import_mcp() -> Any:
    try:
        import mcp.server.mcpserver as mcpserver
    except ImportError:  # pragma: no cover - the extra is installed where this runs
        raise MissingDependencyError("mcp", "mcp") from None
    return mcpserver


class _Tools:
    """The tool bodies: scope resolution, argument validation, the dispatcher."""

    def __init__(self, services: Services, scope: McpScope, *, http: bool) -> None:
        self.services = services
        self.scope = scope
        self.http = http

    def principal(self) -> Principal:
        """Who the call acts as: the verified bearer key over HTTP, the configuration (an
        account, an agent and perhaps a user) over stdio."""
        if not self.http:
            assert self.scope.account_id is not None
            return Principal(
                account_id=self.scope.account_id,
                agents=(self.scope.agent,),
                user_id=self.scope.user_id,
            )
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        claims = None if token is None else token.claims
        if not claims:
            raise PermissionDeniedError("missing API key")
        principal = Principal(
            account_id=str(claims["account_id"]),
            scope=Scope(str(claims["scope"])),
            agents=tuple(claims["agents"]),
            user_id=self.scope.user_id,
            key_id=str(claims["key_id"]),
        )
        if self.scope.account_id is not None and principal.account_id != self.scope.account_id:
            raise PermissionDeniedError("API key is not valid for this account")
        return principal

    async def run(
        self, name: str, user_id: str | None, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """Run tool ``name`` through the gate; Confide errors become tool errors."""
        try:
            given = {k: v for k, v in arguments.items() if v is not None and k != "user_id"}
            return await self.services.agate.call_tool(
                self.principal(), name, given, user_id=user_id
            )
        except ConfideError as exc:
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError(f"{type(exc).__name__}: {exc}") from None

    async def memories(self, user_id: str) -> str:
        try:
            principal = self.principal()
            # What reaches the agent: its allowlist's categories, as every read that feeds it.
            memories = await self.services.agate.memories_for(
                principal, user_id=user_id, limit=_LIST_LIMIT
            )
        except ConfideError as exc:
            from mcp.server.mcpserver.exceptions import ResourceError

            raise ResourceError(f"{type(exc).__name__}: {exc}") from None
        document = [
            {
                "memoryId": m.id,
                "key": m.key,
                "value": m.value,
                "type": m.type.value,
                "visibility": m.visibility.value,
                "updatedAt": m.updated_at.isoformat(),
            }
            for m in memories
        ]
        owner = principal.acting_user(user_id)
        return json.dumps({"userId": owner, "memories": document})


_User = Annotated[str | None, Field(description=_USER_ID_PROPERTY)]
_Key = Annotated[str | None, Field(description="The memory's key (case-insensitive).")]
_Id = Annotated[str | None, Field(description="The memory's id, if you know it.")]
_TYPES = f"One of: {', '.join(EXTRACTABLE_TYPE_NAMES)}."
_Type = Annotated[str | None, Field(description=_TYPES)]
_Confidence = Annotated[float | None, Field(description="How sure you are, 0 to 1.")]


def _add_tools(server: Any, tools: _Tools) -> None:
    """Register the six tools; the dispatcher validates their arguments (loose types here, so
    a bad value fails with the dispatcher's own message, as for every other caller)."""
    descriptions = {t["name"]: str(t["description"]) for t in realtime_tools()}
    descriptions["memory_history"] = _HISTORY_DESCRIPTION

    async def store_memory(
        memory_type: Annotated[str, Field(description=_TYPES)],
        key: Annotated[str, Field(description="A snake_case key, e.g. preferred_name.")],
        value: Annotated[str, Field(description="What to remember, briefly.")],
        confidence: _Confidence = None,
        suggest_reminder: Annotated[
            bool | None, Field(description="For a follow_up: offer the user a reminder.")
        ] = None,
        user_id: _User = None,
    ) -> dict[str, Any]:
        return await tools.run(
            "store_memory",
            user_id,
            {
                "memory_type": memory_type,
                "key": key,
                "value": value,
                "confidence": confidence,
                "suggest_reminder": suggest_reminder,
            },
        )

    async def update_memory(
        existing_key: Annotated[str, Field(description="The key to change.")],
        new_value: Annotated[str, Field(description="The new value.")],
        memory_type: _Type = None,
        confidence: _Confidence = None,
        user_id: _User = None,
    ) -> dict[str, Any]:
        return await tools.run(
            "update_memory",
            user_id,
            {
                "existing_key": existing_key,
                "new_value": new_value,
                "memory_type": memory_type,
                "confidence": confidence,
            },
        )

    async def forget_memory(
        key: _Key = None, memory_id: _Id = None, user_id: _User = None
    ) -> dict[str, Any]:
        return await tools.run("forget_memory", user_id, {"key": key, "memory_id": memory_id})

    async def mark_private(
        key: _Key = None, memory_id: _Id = None, user_id: _User = None
    ) -> dict[str, Any]:
        return await tools.run("mark_private", user_id, {"key": key, "memory_id": memory_id})

    async def memory_history(
        key: _Key = None, memory_id: _Id = None, user_id: _User = None
    ) -> dict[str, Any]:
        return await tools.run("memory_history", user_id, {"key": key, "memory_id": memory_id})

    async def memory_query(
        query: Annotated[str, Field(description="What you want to recall.")],
        agent: Annotated[str | None, Field(description="Your agent name.")] = None,
        categories: Annotated[list[str] | None, Field(description="Only these.")] = None,
        filters: Annotated[
            dict[str, Any] | None, Field(description='e.g. {"types": ["follow_up"]}.')
        ] = None,
        top_k: Annotated[int | None, Field(description="1 to 50 (default 3).")] = None,
        budget_tokens: Annotated[int | None, Field(description="Token budget.")] = None,
        threshold: Annotated[float | None, Field(description="Minimum similarity.")] = None,
        user_id: _User = None,
    ) -> dict[str, Any]:
        return await tools.run(
            "memory_query",
            user_id,
            {
                "query": query,
                "agent": agent,
                "categories": categories,
                "filters": filters,
                "top_k": top_k,
                "budget_tokens": budget_tokens,
                "threshold": threshold,
            },
        )

    for fn in (
        store_memory,
        update_memory,
        forget_memory,
        mark_private,
        memory_query,
        memory_history,
    ):
        server.add_tool(fn, name=fn.__name__, description=descriptions[fn.__name__])


def create_mcp_server(
    services: Services,
    scope: McpScope,
    *,
    http: bool = False,
    url: str = "http://127.0.0.1:8765/mcp",
) -> Any:
    """An ``MCPServer`` serving Confide's memory tools and the user-memories resource.

    Args:
        services: the service container (its dispatcher runs the tools, its key table
            verifies bearer keys).
        scope: the configured account, user and agent.
        http: serve over streamable HTTP with bearer API keys (else stdio, scoped by
            ``scope``).
        url: the HTTP endpoint's public URL (the resource the keys are presented to).

    Raises:
        ValidationError: stdio without an account.
        MissingDependencyError: the ``mcp`` extra is not installed.
    """
    mcpserver = _import_mcp()
    if not http and not scope.account_id:
        raise ConfideValidationError("confide mcp over stdio needs --account")
    tools = _Tools(services, scope, http=http)
    extra: dict[str, Any] = {}
    if http:
        from mcp.server.auth.settings import AuthSettings

        extra = {
            "token_verifier": _KeyVerifier(services.keys),
            # Confide keys are bound to an account, not to an audience: the verifier decides.
            "auth": AuthSettings(
                issuer_url=url.rsplit("/", 1)[0],
                resource_server_url=url,
                validate_token_resource=False,
            ),
        }
    server = mcpserver.MCPServer(
        name="confide",
        instructions=(
            "Long-term memory of the user. Store what is worth remembering silently; look it "
            "up with memory_query."
        ),
        log_level="WARNING",
        **extra,
    )
    _add_tools(server, tools)

    async def user_memories(user_id: str) -> str:
        """The user's active memories (newest first), as JSON."""
        return await tools.memories(user_id)

    server.resource(_RESOURCE, name="memories", mime_type="application/json")(user_memories)
    return server


class _KeyVerifier:
    """The MCP SDK's token verifier over Confide's API keys (checked on every request)."""

    def __init__(self, keys: ApiKeys) -> None:
        self._keys = keys

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        key = await asyncio.to_thread(self._keys.verify, token)
        if key is None:
            return None
        return AccessToken(
            token=token,
            client_id=key.id,
            scopes=[],
            claims={
                "key_id": key.id,
                "account_id": key.account_id,
                "agents": list(key.agents),
                "scope": key.scope,
            },
        )


def mcp_http_app(server: Any) -> Any:
    """The streamable-HTTP ASGI app of a server made with ``http=True`` (path ``/mcp``)."""
    return server.streamable_http_app()


def open_services(confide: Confide) -> Services:
    """The service container over an open :class:`Confide`'s components (dispatcher, keys,
    proposals, gate): the same parts the SDK uses, built once."""
    return Services(confide.components)
