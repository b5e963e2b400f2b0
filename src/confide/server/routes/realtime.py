"""``WS /sessions/{id}/realtime``: relay Realtime server events through the adapter.

A voice bridge forwards each server event it receives from the Realtime provider as a text
message; the socket answers with the client events to send back, one text message each.
The first message from the service is the opening ``session.update`` (instructions with
the user's memories, and the tools). Authenticate with ``Authorization: Bearer <key>``.

A call's turns live in the memory of the one process holding the call (the first to buffer
a turn, open this socket or end it); the socket reaching another process is refused before
the upgrade with 409 ``{"error": "Call session is held by another worker", "worker": ...}``.

Tool calls run through the gate under that key: it is verified again at each call, so a key
revoked while the socket is open stops its tools and closes the socket, and ``memory_query``
may only act as an agent the key is bound to. A key that may only read opens no call (its
turns would become memories): the socket is closed with 1008 before it is accepted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect, status
from fastapi.responses import JSONResponse

from confide.conversation.buffer import Session
from confide.errors import ConfideError, PermissionDeniedError, SessionHeldError
from confide.gate import Gate
from confide.server.auth import ApiKeys
from confide.server.errors import held_body
from confide.server.services import Services

router = APIRouter(tags=["sessions"])


class KeyBoundDispatcher:
    """Runs one socket's tool calls through the gate under its API key (the Realtime
    ``Dispatcher``).

    Args:
        gate: the service's gate.
        keys: where the key is verified.
        token: the socket's bearer token.
    """

    def __init__(self, gate: Gate, keys: ApiKeys, token: str) -> None:
        self._gate = gate
        self._keys = keys
        self._token = token
        self.revoked = False

    async def dispatch(self, name: str, arguments_json: str, session: Session) -> dict[str, Any]:
        """Verify the key again, then run the tool through the gate for the call's user.

        Raises:
            PermissionDeniedError: the key was revoked, may only read, or names an agent it
                is not bound to.
            ValidationError: unknown tool or invalid arguments.
        """
        key = await asyncio.to_thread(self._keys.verify, self._token)
        if key is None:
            self.revoked = True
            raise PermissionDeniedError("API key is no longer valid")
        return await self._gate.call_tool(
            key.principal,
            name,
            arguments_json,
            user_id=session.user_id,
            session_id=session.session_id,
        )


@router.websocket("/sessions/{call_session_id}/realtime")
async def realtime(websocket: WebSocket, call_session_id: str) -> None:
    """Run the Realtime adapter for one call session over a websocket."""
    services: Services = websocket.app.state.services
    header = websocket.headers.get("authorization", "")
    token = header[7:] if header.lower().startswith("bearer ") else ""
    key = await asyncio.to_thread(services.keys.verify, token) if token else None
    if key is None:
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION)
        return
    account = key.account_id
    try:
        # The call's turns become memories when it ends: a key that may only read holds none.
        services.gate.open_call(key.principal)
        row = await asyncio.to_thread(services.session_of, call_session_id, account_id=account)
        # Another process holding the call's turns: refused before the upgrade, with the
        # same 409 answer as ``/turns`` (a socket here would buffer part of the call).
        row = await services.hold_session(row)
    except SessionHeldError as exc:
        await websocket.send_denial_response(JSONResponse(held_body(exc), status_code=409))
        return
    except ConfideError:
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION)
        return
    await websocket.accept()
    # The socket is the call: opening it connects the session, closing it ends the call
    # (extraction as ``POST /sessions/{id}/end`` schedules it, once even if both happen).
    await services.connect_session(row)
    session = services.buffer_session(row)
    dispatcher = KeyBoundDispatcher(services.gate, services.keys, token)
    # The delta header and the instructions' memories are those of the agent the key acts
    # as, like its memory_query answers.
    reader = key.agent_for(None)
    adapter = services.adapter(
        session.session_id,
        dispatcher=dispatcher,
        reader=reader,
        categories=services.gate.readable(key.principal),
    )
    await websocket.send_json(await adapter.session_update())
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            if text is None:
                # Server events are JSON text; a binary frame is not one (ignored, like any
                # unusable event, instead of ending the call).
                continue
            for event in await adapter.handle_json(text):
                await websocket.send_text(event)
            if dispatcher.revoked:
                await websocket.close(code=status.WS_1008_POLICY_VIOLATION)
                return
    except WebSocketDisconnect:
        pass
    finally:
        await services.end_session(row)
