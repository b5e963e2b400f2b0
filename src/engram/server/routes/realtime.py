"""``WS /sessions/{id}/realtime``: relay Realtime server events through the adapter.

A voice bridge forwards each server event it receives from the Realtime provider as a text
message; the socket answers with the client events to send back, one text message each.
The first message from the service is the opening ``session.update`` (instructions with
the user's memories, and the tools). Authenticate with ``Authorization: Bearer <key>``.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, WebSocket, WebSocketDisconnect, status

from engram.errors import EngramError
from engram.server.services import Services

router = APIRouter(tags=["sessions"])


@router.websocket("/sessions/{call_session_id}/realtime")
async def realtime(websocket: WebSocket, call_session_id: str) -> None:
    """Run the Realtime adapter for one call session over a websocket."""
    services: Services = websocket.app.state.services
    header = websocket.headers.get("authorization", "")
    token = header[7:] if header.lower().startswith("bearer ") else ""
    account = await asyncio.to_thread(services.keys.account_of, token) if token else None
    if account is None:
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION)
        return
    try:
        row = await asyncio.to_thread(services.session_of, call_session_id, account_id=account)
    except EngramError:
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION)
        return
    await websocket.accept()
    session = services.buffer_session(row)
    adapter = services.adapter(session.session_id)
    await websocket.send_json(await adapter.session_update())
    try:
        while True:
            text = await websocket.receive_text()
            for event in await adapter.handle_json(text):
                await websocket.send_text(event)
    except WebSocketDisconnect:
        return
