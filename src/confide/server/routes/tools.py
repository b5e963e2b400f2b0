"""``POST /tools/*``: the agent's memory tools for voice bridges (camelCase bodies)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from confide.conversation.tools import (
    ForgetMemoryArgs,
    MarkPrivateArgs,
    StoreMemoryArgs,
    UpdateMemoryArgs,
)
from confide.errors import ConfideError
from confide.gate import Principal
from confide.server.deps import Caller, Svc, check_account
from confide.server.errors import ApiError, allowed_values
from confide.server.schemas import (
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


def _require(body: BaseModel, *names: str, one_of: tuple[str, ...] = ()) -> None:
    """400 ``Missing required fields``, naming them, unless every field in ``names`` and at
    least one of ``one_of`` is given."""
    missing = [n for n in names if _blank(getattr(body, n))]
    if one_of and all(_blank(getattr(body, n)) for n in one_of):
        missing.extend(one_of)
    if missing:
        raise ApiError(400, MISSING, fields=[_request_name(type(body), n) for n in missing])


def _args(model: type[BaseModel], data: dict[str, Any], body: type[BaseModel]) -> BaseModel:
    """The tool's arguments; 400 naming the invalid fields (and the values enums allow)."""
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        fields: list[str] = []
        allowed: dict[str, list[str]] = {}
        for err in exc.errors(include_input=False, include_url=False):
            name = str(err["loc"][0]) if err["loc"] else ""
            shown = _request_name(body, name) if name else "body"
            if shown not in fields:
                fields.append(shown)
            field = model.model_fields.get(name)
            values = None if field is None else allowed_values(field.annotation)
            if values is not None and err["type"] in ("enum", "literal_error"):
                allowed[shown] = values
        fields.sort()
        message = f"Invalid fields: {', '.join(fields)}" + "".join(
            f"; {name} must be one of: {', '.join(values)}" for name, values in allowed.items()
        )
        raise ApiError(400, message, fields=fields, allowed=allowed) from None


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
async def store_memory(body: StoreMemoryBody, services: Svc, caller: Caller) -> dict[str, Any]:
    """Store a memory silently; a ``follow_up`` with ``suggestReminder`` offers a reminder."""
    _require(body, *_CALL, "memory_type", "key", "value")
    args = _args(
        StoreMemoryArgs,
        {
            "memory_type": body.memory_type,
            "key": body.key,
            "value": body.value,
            "confidence": 1.0 if body.confidence is None else body.confidence,
            "suggest_reminder": bool(body.suggest_reminder),
        },
        StoreMemoryBody,
    )
    return await _run(services, caller, body, "store_memory", args)


@router.post(
    "/update_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def update_memory(body: UpdateMemoryBody, services: Svc, caller: Caller) -> dict[str, Any]:
    """Update the memory with ``existingKey`` (case-insensitive), or create it."""
    _require(body, *_CALL, "existing_key", "new_value")
    data: dict[str, Any] = {"existing_key": body.existing_key, "new_value": body.new_value}
    if body.memory_type is not None:
        data["memory_type"] = body.memory_type
    if body.confidence is not None:
        data["confidence"] = body.confidence
    args = _args(UpdateMemoryArgs, data, UpdateMemoryBody)
    return await _run(services, caller, body, "update_memory", args)


@router.post(
    "/forget_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def forget_memory(body: TargetBody, services: Svc, caller: Caller) -> dict[str, Any]:
    """Forget (soft-delete) a memory by ``key`` or ``memoryId``."""
    _require(body, *_CALL, one_of=("key", "memory_id"))
    args = _args(ForgetMemoryArgs, {"key": body.key, "memory_id": body.memory_id}, TargetBody)
    return await _run(services, caller, body, "forget_memory", args)


@router.post(
    "/mark_private",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def mark_private(body: TargetBody, services: Svc, caller: Caller) -> dict[str, Any]:
    """Make a memory private to its user, by ``key`` or ``memoryId``."""
    _require(body, *_CALL, one_of=("key", "memory_id"))
    args = _args(MarkPrivateArgs, {"key": body.key, "memory_id": body.memory_id}, TargetBody)
    return await _run(services, caller, body, "mark_private", args)
