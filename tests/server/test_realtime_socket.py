"""The Realtime socket over a real server: the route exists with the ``server`` extra, the
socket is the call (opening connects it, closing ends it), and hostile events do not drop it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from tests.server.conftest import ACCOUNT, Api
from websockets.sync.client import connect

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.server.services import ALREADY_ENDED
from confide.testing.loopback import serve_on_loopback

TRANSCRIPT = "conversation.item.input_audio_transcription.completed"


def _event(kind: str, **fields: object) -> str:
    return json.dumps({"type": kind, **fields})


def test_the_socket_connects_and_ends_the_call(engine: MemoryEngine, settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"min_session_seconds": 0.0}), engine=engine)
    token = app.state.services.keys.create(ACCOUNT)
    auth = {"Authorization": f"Bearer {token}"}
    with serve_on_loopback(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        sid = client.post(
            "/sessions", json={"accountId": ACCOUNT, "lineId": "line-ws"}, headers=auth
        ).json()["callSessionId"]
        url = base.replace("http://", "ws://") + f"/sessions/{sid}/realtime"
        with connect(url, additional_headers=auth) as socket:
            assert json.loads(socket.recv(timeout=30))["type"] == "session.update"
            assert client.get(f"/sessions/{sid}", headers=auth).json()["state"] == "connected"
            socket.send("[" * 100_000 + "]" * 100_000)  # too deep to parse: ignored
            socket.send(_event(TRANSCRIPT, transcript="My dog is called Biscuit."))
            socket.send(_event(TRANSCRIPT, transcript="I grew up in Aberdeen."))
            # The socket still answers after the hostile event: a tool call gets its output.
            socket.send(
                _event(
                    "response.function_call_arguments.done",
                    call_id="c1",
                    name="memory_query",
                    arguments=json.dumps({"query": "dog"}),
                )
            )
            assert json.loads(socket.recv(timeout=30))["type"] == "conversation.item.create"
    # The server has stopped (its handlers and background work finished): the close ended the
    # call and extraction ran from the socket's turns.
    row = app.state.services.tables.get_session(sid, account_id=ACCOUNT)
    assert row is not None and row.ended_at is not None
    assert row.summarization == "done" and row.memories_extracted >= 1


@pytest.mark.asyncio
async def test_two_enders_end_a_call_once(api: Api) -> None:
    sid = await api.session("line-race")
    assert (
        await api.post(
            f"/sessions/{sid}/turns", {"speaker": "user", "text": "I have a dog named Biscuit."}
        )
    ).status_code == 200
    services = api.app.state.services
    row = services.session_of(sid, account_id=ACCOUNT)
    outcomes = await asyncio.gather(services.end_session(row), services.end_session(row))
    assert sorted(outcomes, key=str) == [("scheduled", None), ("skipped", ALREADY_ENDED)]
    await api.join()
    status = (await api.client.get(f"/sessions/{sid}", headers=api.auth)).json()
    assert status["summarization"] == "done"
    listed = await api.client.get("/v1/memories", params={"user_id": "line-race"}, headers=api.auth)
    assert [m["value"] for m in listed.json()["memories"]] == ["Biscuit"]  # extracted once
