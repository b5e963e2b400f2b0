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

Each tool is declared by its JSON schema, its arguments named as the HTTP tool bodies name
them (``memoryType``, ``existingKey``, ``memoryId``, ...); the snake_case names of the
OpenAI tool schemas are accepted too. The SDK validates nothing itself: every call, of a known
tool or not, goes to the gate, which validates the arguments as for every other door. A
tool's ``userId`` (or ``user_id``) argument names the user within that account; when the
server is configured with a user, a different one is refused. Tool failures come back as MCP
tool errors whose text is ``<ErrorClass>: <message>``, the message every door gives, with
the structured answer of :func:`confide.errors.error_answer` (``type``, ``fields``,
``allowed``); nothing logs a value or an argument.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from confide.client import Confide
from confide.conversation.tools import TOOL_NAMES, realtime_tools, tool_parameters
from confide.errors import (
    ConfideError,
    MissingDependencyError,
    PermissionDeniedError,
    error_answer,
    error_text,
)
from confide.errors import ValidationError as ConfideValidationError
from confide.gate import Principal, Scope
from confide.server.auth import ApiKeys
from confide.server.services import Services
from confide.types import invalid

__all__ = ["McpScope", "create_mcp_server", "mcp_http_app"]

_RESOURCE = "confide://users/{user_id}/memories"
_LIST_LIMIT = 1000
_HISTORY_DESCRIPTION = (
    "The audit history of one memory, newest first: what happened to it (added, updated, "
    "forgotten, restored, made private), by whom and when. Never the values. Give its key or "
    "its memoryId."
)
_USER_ID_PROPERTY = (
    "The user whose memory this is, within the caller's account (optional when the server "
    "is configured with a user)."
)


_USER_NAMES = frozenset({"userId", "user_id"})


class _UserArgument(BaseModel):
    """A tool call's ``userId`` (or ``user_id``), validated like the tool's own arguments."""

    model_config = ConfigDict(extra="ignore")
    user_id: Annotated[
        str | None, Field(max_length=256, validation_alias=AliasChoices("userId", "user_id"))
    ] = None


def _user_of(name: str, arguments: Mapping[str, Any]) -> str | None:
    """The user a call names, if any (a blank one names none).

    Raises:
        ValidationError: a ``userId`` that is not a string (named as the caller spelled it).
    """
    try:
        user = _UserArgument.model_validate(arguments).user_id
    except PydanticValidationError as exc:
        raise invalid(exc, what=f"{name}: invalid arguments") from None
    return user if user and user.strip() else None


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

    async def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Run tool ``name`` through the gate: a ``CallToolResult`` with the answer, or a tool
        error reading ``<ErrorClass>: <message>`` (the message every door gives) whose
        structured content is :func:`~confide.errors.error_answer`."""
        from mcp_types import CallToolResult, TextContent

        try:
            user_id = _user_of(name, arguments)
            given = {k: v for k, v in arguments.items() if k not in _USER_NAMES}
            result = await self.services.agate.call_tool(
                self.principal(), name, given, user_id=user_id
            )
        except ConfideError as exc:
            # The text for the model; the structured answer (type, fields, allowed) for
            # programs, as the other doors give it.
            text = TextContent(type="text", text=error_text(exc))
            return CallToolResult(
                content=[text], structured_content=error_answer(exc), is_error=True
            )
        text = TextContent(type="text", text=json.dumps(result, indent=2))
        return CallToolResult(content=[text], structured_content=result)

    async def memories(self, user_id: str) -> str:
        try:
            principal = self.principal()
            # What reaches the agent: its allowlist's categories, as every read that feeds it.
            memories = await self.services.agate.memories_for(
                principal, user_id=user_id, limit=_LIST_LIMIT
            )
        except ConfideError as exc:
            from mcp.server.mcpserver.exceptions import ResourceError

            raise ResourceError(error_text(exc)) from None
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


def _tool_list(mcpserver: Any) -> list[Any]:
    """The six tools as the SDK lists them, each declared by its JSON schema (camelCase, as
    the HTTP tool bodies spell the arguments, plus ``userId``); nothing of the SDK validates
    the arguments: :meth:`_Tools.call` hands them to the gate."""
    descriptions = {t["name"]: str(t["description"]) for t in realtime_tools()}
    descriptions["memory_history"] = _HISTORY_DESCRIPTION

    async def answer() -> dict[str, Any]:  # the output's type; never called
        raise NotImplementedError

    listed = []
    for name in (*TOOL_NAMES, "memory_history"):
        schema = tool_parameters(name, camel=True)
        schema["properties"]["userId"] = {"type": "string", "description": _USER_ID_PROPERTY}
        tool = mcpserver.tools.Tool.from_function(answer, name=name, description=descriptions[name])
        listed.append(tool.model_copy(update={"parameters": schema}))
    return listed


def _server_type(mcpserver: Any) -> Any:
    """``MCPServer`` whose every tool call, of a known tool or not, goes through the gate."""

    class ConfideMCPServer(mcpserver.MCPServer):  # type: ignore[misc]
        """The SDK's server, with Confide's tool calls."""

        tools: _Tools

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            """Run tool ``name`` through the gate (errors are ``<ErrorClass>: <message>``)."""
            return await self.tools.call(name, arguments)

    return ConfideMCPServer


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
    server = _server_type(mcpserver)(
        name="confide",
        tools=_tool_list(mcpserver),
        instructions=(
            "Long-term memory of the user. Store what is worth remembering silently; look it "
            "up with memory_query."
        ),
        log_level="WARNING",
        **extra,
    )
    server.tools = tools

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
