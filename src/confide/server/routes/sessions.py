"""``/sessions``: call sessions of voice bridges (camelCase bodies).

Session records persist; turns stay in the process's ephemeral buffer; ending a session
answers at once while extraction runs in the background.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from confide.errors import ConfideError
from confide.server.deps import Caller, Svc, check_account
from confide.server.errors import ApiError
from confide.server.schemas import (
    CreateSessionBody,
    CreateSessionResponse,
    EndSessionResponse,
    HeldResponse,
    OkResponse,
    SessionStatusResponse,
    ToolResponse,
    TurnBody,
)

router = APIRouter(prefix="/sessions", tags=["sessions"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ToolResponse, "description": "Missing required fields"},
    401: {"model": ToolResponse, "description": "Missing or invalid API key"},
    403: {"model": ToolResponse, "description": "The API key belongs to another account"},
    404: {"model": ToolResponse, "description": "Call session not found"},
}
_HELD: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    409: {
        "model": HeldResponse,
        "description": "The call has ended (turns), or another worker holds its turns: "
        "route every request of a call by its callSessionId",
    },
}


@router.post("", response_model=CreateSessionResponse, responses=_ERRORS)
async def create_session(
    body: CreateSessionBody, services: Svc, caller: Caller
) -> CreateSessionResponse:
    """Start a call session for a line (user) of the key's account."""
    services.gate.open_call(caller)
    account = caller.account_id
    given = {"accountId": body.account_id, "lineId": body.line_id}
    missing = [name for name, value in given.items() if not value]
    if missing:
        raise ApiError(400, "Missing required fields", fields=missing)
    check_account(account, body.account_id)
    session_id = await asyncio.to_thread(
        lambda: services.start_session(
            account_id=account,
            user_id=services.gate.user(caller, str(body.line_id)),
            is_reminder=body.is_reminder_call,
        )
    )
    return CreateSessionResponse(callSessionId=session_id)


@router.post("/{call_session_id}/connected", response_model=OkResponse, responses=_ERRORS)
async def session_connected(call_session_id: str, services: Svc, caller: Caller) -> OkResponse:
    """Record that the call connected (the session's duration counts from here)."""
    services.gate.open_call(caller)
    account = caller.account_id
    row = await asyncio.to_thread(services.session_of, call_session_id, account_id=account)
    await services.connect_session(row)
    return OkResponse()


@router.post("/{call_session_id}/turns", response_model=OkResponse, responses=_HELD)
async def add_turn(
    call_session_id: str, body: TurnBody, services: Svc, caller: Caller
) -> OkResponse:
    """Add an utterance to the session's in-memory buffer (never stored)."""
    services.gate.open_call(caller)
    account = caller.account_id
    if body.speaker is None or body.text is None:
        given = {"speaker": body.speaker, "text": body.text}
        missing = [name for name, value in given.items() if value is None]
        raise ApiError(400, "Missing required fields", fields=missing)
    row = await asyncio.to_thread(services.session_of, call_session_id, account_id=account)
    if row.ended_at is not None:
        raise ApiError(409, "Call session has ended")
    row = await services.hold_session(row)
    live = services.buffer_session(row)
    try:
        services.buffer.add_turn(live.session_id, body.speaker, body.text)
    except ConfideError as exc:
        raise ApiError(400, str(exc)) from None
    return OkResponse()


@router.get("/{call_session_id}", response_model=SessionStatusResponse, responses=_ERRORS)
async def session_status(
    call_session_id: str, services: Svc, caller: Caller
) -> SessionStatusResponse:
    """A call session's state and its extraction's outcome (times and counts, never text);
    for the keys that hold calls (a read key holds none)."""
    services.gate.open_call(caller)
    account = caller.account_id
    row = await asyncio.to_thread(services.session_of, call_session_id, account_id=account)
    return SessionStatusResponse.of(row, skip_reason=services.skip_reason(row))


@router.post(
    "/{call_session_id}/end",
    response_model=EndSessionResponse,
    responses=_HELD,
    response_model_exclude_none=True,
)
async def end_session(call_session_id: str, services: Svc, caller: Caller) -> EndSessionResponse:
    """End the call; extraction (if the call qualifies) runs after this answer.

    ``"skipped"`` comes with a ``reason``: the call never connected, was a reminder call,
    was shorter than ``CONFIDE_MIN_SESSION_SECONDS``, had already ended, or had no turns.
    """
    services.gate.open_call(caller)
    account = caller.account_id
    row = await asyncio.to_thread(services.session_of, call_session_id, account_id=account)
    outcome, reason = await services.end_session(row)
    return EndSessionResponse(summarization=outcome, reason=reason)
