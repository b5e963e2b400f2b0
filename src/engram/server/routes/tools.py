"""``POST /tools/*``: the agent's memory tools for voice bridges (camelCase bodies)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from engram.conversation.dispatcher import Owner
from engram.conversation.tools import (
    ForgetMemoryArgs,
    MarkPrivateArgs,
    StoreMemoryArgs,
    UpdateMemoryArgs,
)
from engram.errors import EngramError
from engram.server.deps import Account, Svc, check_account
from engram.server.errors import ApiError
from engram.server.schemas import (
    StoreMemoryBody,
    TargetBody,
    ToolCallBody,
    ToolResponse,
    UpdateMemoryBody,
)
from engram.server.services import Services

router = APIRouter(prefix="/tools", tags=["tools"])

MISSING = "Missing required fields"
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ToolResponse, "description": "Missing required fields or invalid values"},
    401: {"model": ToolResponse, "description": "Missing or invalid API key"},
    403: {"model": ToolResponse, "description": "The API key belongs to another account"},
    404: {"model": ToolResponse, "description": "Call session (or memory) not found"},
}


def _require(*values: object) -> None:
    if any(v is None or (isinstance(v, str) and not v.strip()) for v in values):
        raise ApiError(400, MISSING)


def _args(model: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors()})
        raise ApiError(400, f"Invalid fields: {', '.join(fields)}") from None


async def _run(
    services: Services, account: str, body: ToolCallBody, tool: str, args: BaseModel
) -> dict[str, Any]:
    check_account(account, body.account_id)
    assert body.call_session_id is not None and body.line_id is not None
    row = await asyncio.to_thread(services.session_of, body.call_session_id, account_id=account)
    if row.user_id != body.line_id:
        raise ApiError(404, "Call session not found")
    owner = Owner(account, body.line_id, row.id)
    result = await services.dispatcher.call(tool, args, owner=owner)
    key = getattr(args, "key", None) or getattr(args, "existing_key", None)
    if tool in ("store_memory", "update_memory") and isinstance(key, str):
        # A session ended in this process has nothing left to skip.
        with contextlib.suppress(EngramError):
            services.buffer.record_stored_key(row.id, key)
    return result


@router.post(
    "/store_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def store_memory(body: StoreMemoryBody, services: Svc, account: Account) -> dict[str, Any]:
    """Store a memory silently; a ``follow_up`` with ``suggestReminder`` offers a reminder."""
    _require(
        body.call_session_id, body.line_id, body.account_id, body.memory_type, body.key, body.value
    )
    args = _args(
        StoreMemoryArgs,
        {
            "memory_type": body.memory_type,
            "key": body.key,
            "value": body.value,
            "confidence": 1.0 if body.confidence is None else body.confidence,
            "suggest_reminder": bool(body.suggest_reminder),
        },
    )
    return await _run(services, account, body, "store_memory", args)


@router.post(
    "/update_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def update_memory(body: UpdateMemoryBody, services: Svc, account: Account) -> dict[str, Any]:
    """Update the memory with ``existingKey`` (case-insensitive), or create it."""
    _require(body.call_session_id, body.line_id, body.account_id, body.existing_key, body.new_value)
    data: dict[str, Any] = {"existing_key": body.existing_key, "new_value": body.new_value}
    if body.memory_type is not None:
        data["memory_type"] = body.memory_type
    if body.confidence is not None:
        data["confidence"] = body.confidence
    args = _args(UpdateMemoryArgs, data)
    return await _run(services, account, body, "update_memory", args)


@router.post(
    "/forget_memory",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def forget_memory(body: TargetBody, services: Svc, account: Account) -> dict[str, Any]:
    """Forget (soft-delete) a memory by ``key`` or ``memoryId``."""
    _require(body.call_session_id, body.line_id, body.account_id, body.key or body.memory_id)
    args = _args(ForgetMemoryArgs, {"key": body.key, "memory_id": body.memory_id})
    return await _run(services, account, body, "forget_memory", args)


@router.post(
    "/mark_private",
    response_model=ToolResponse,
    responses=_ERRORS,
    response_model_exclude_none=True,
)
async def mark_private(body: TargetBody, services: Svc, account: Account) -> dict[str, Any]:
    """Make a memory private to its user, by ``key`` or ``memoryId``."""
    _require(body.call_session_id, body.line_id, body.account_id, body.key or body.memory_id)
    args = _args(MarkPrivateArgs, {"key": body.key, "memory_id": body.memory_id})
    return await _run(services, account, body, "mark_private", args)
