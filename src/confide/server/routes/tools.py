"""``POST /tools/*``: the agent's memory tools for voice bridges (camelCase bodies).

A body carries the call's fields (``callSessionId``, ``lineId``, ``accountId``; missing ones
are ``Missing required fields``, naming them) and the tool's arguments, under their camelCase
or snake_case names. The arguments are validated by the tool itself
(:func:`confide.conversation.tools.parse_arguments`, through the gate), so a bad one is
refused with the same ``type``, ``error``, ``fields`` and ``allowed`` as over MCP and the
Realtime socket. ``/tools/{name}`` runs any other tool (``memory_query``,
``memory_history``); an unknown name is a ``ValidationError``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from confide.conversation.tools import parse_arguments
from confide.errors import ConfideError
from confide.gate import Principal
from confide.server.deps import Caller, Svc, check_account
from confide.server.errors import ApiError
from confide.server.schemas import (
    AnyToolBody,
    StoreMemoryBody,
    TargetBody,
    ToolCallBody,
    ToolResponse,
    UpdateMemoryBody,
)
from confide.server.services import Services

router = APIRouter(prefix="/tools", tags=["tools"])

MISSING = "Missing required fields"
_CALL = ("call_session_id", "line_id", "account_id")
_CALL_NAMES = frozenset({*_CALL, "callSessionId", "lineId", "accountId"})
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ToolResponse, "description": "Missing required fields or invalid values"},
    401: {"model": ToolResponse, "description": "Missing or invalid API key"},
    403: {"model": ToolResponse, "description": "The API key belongs to another account"},
    404: {"model": ToolResponse, "description": "Call session (or memory) not found"},
}


def _request_name(body: type[BaseModel], name: str) -> str:
    """A body field's name as the request spells it (its camelCase alias)."""
    field = body.model_fields.get(name)
    return name if field is None or field.alias is None else field.alias


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _require_call(body: ToolCallBody) -> None:
    """400 ``Missing required fields``, naming them, unless the call's fields are given."""
    missing = [n for n in _CALL if _blank(getattr(body, n))]
    if missing:
        raise ApiError(400, MISSING, fields=[_request_name(type(body), n) for n in missing])


async def _args(tool: str, body: ToolCallBody, request: Request) -> BaseModel:
    """The tool's arguments, as the request spelled them (its body less the call's fields),
    validated by the tool.

    Raises:
        ApiError: a call field is missing (400).
        ValidationError: an unknown tool or invalid arguments (400, from the tool).
    """
    _require_call(body)
    data = await request.json()  # the body FastAPI has read (and parsed) already
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in _CALL_NAMES}
    return parse_arguments(tool, data)


async def _run(
    services: Services, caller: Principal, body: ToolCallBody, tool: str, args: BaseModel
) -> dict[str, Any]:
    account = caller.account_id
    check_account(account, body.account_id)
    assert body.call_session_id is not None and body.line_id is not None
    row = await asyncio.to_thread(services.session_of, body.call_session_id, account_id=account)
    if row.user_id != body.line_id:
        raise ApiError(404, "Call session not found")
    result = await services.agate.call_tool(
        caller, tool, args, user_id=body.line_id, session_id=row.id
    )
    key = getattr(args, "key", None) or getattr(args, "existing_key", None)
    if tool in ("store_memory", "update_memory") and isinstance(key, str):
        # A session ended in this process has nothing left to skip.
        with contextlib.suppress(ConfideError):
            services.buffer.record_stored_key(row.id, key)
    return result


@router.post(
    "/store_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def store_memory(
    body: StoreMemoryBody, request: Request, services: Svc, caller: Caller
) -> dict[str, Any]:
    """Store a memory silently; a ``follow_up`` with ``suggestReminder`` offers a reminder."""
    args = await _args("store_memory", body, request)
    return await _run(services, caller, body, "store_memory", args)


@router.post(
    "/update_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def update_memory(
    body: UpdateMemoryBody, request: Request, services: Svc, caller: Caller
) -> dict[str, Any]:
    """Update the memory with ``existingKey`` (case-insensitive), or create it."""
    args = await _args("update_memory", body, request)
    return await _run(services, caller, body, "update_memory", args)


@router.post(
    "/forget_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def forget_memory(
    body: TargetBody, request: Request, services: Svc, caller: Caller
) -> dict[str, Any]:
    """Forget (soft-delete) a memory by ``key`` or ``memoryId``."""
    args = await _args("forget_memory", body, request)
    return await _run(services, caller, body, "forget_memory", args)


@router.post(
    "/mark_private",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def mark_private(
    body: TargetBody, request: Request, services: Svc, caller: Caller
) -> dict[str, Any]:
    """Make a memory private to its user, by ``key`` or ``memoryId``."""
    args = await _args("mark_private", body, request)
    return await _run(services, caller, body, "mark_private", args)


@router.post("/{name}", responses=_ERRORS)
async def other_tool(
    name: str, body: AnyToolBody, request: Request, services: Svc, caller: Caller
) -> dict[str, Any]:
    """Run tool ``name`` (``memory_query``, ``memory_history``) with the body's arguments; an
    unknown tool is 400 ``ValidationError``."""
    args = await _args(name, body, request)
    return await _run(services, caller, body, name, args)
