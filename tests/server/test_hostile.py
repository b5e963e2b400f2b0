"""Hostile input, written by hand: what the schema-driven fuzzing cannot reach or must not
miss. Every case answers a clear 4xx (or, on the Realtime socket, is ignored) and leaves the
service answering."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.server.conftest import ACCOUNT, Api
from websockets.sync.client import connect

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.testing.fuzz import answer_problem
from confide.testing.loopback import serve_on_loopback

JSON = {"content-type": "application/json"}
TEN_MB = 10 * 1024 * 1024


async def _still_serves(api: Api) -> None:
    response = await api.client.get("/v1/memories", params={"user_id": "u1"}, headers=api.auth)
    assert response.status_code == 200


def _clear(response: httpx.Response, status: int, *named: str) -> None:
    """``response`` has ``status`` and a JSON error naming each of ``named``."""
    assert response.status_code == status, response.text
    assert answer_problem(response.status_code, response.content) is None
    error = str(response.json()["error"])
    for word in named:
        assert word in error, error


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path", ["/v1/memories", "/sessions", "/tools/store_memory", "/v1/memory_query"]
)
async def test_a_ten_megabyte_body_is_a_413_and_writes_nothing(api: Api, path: str) -> None:
    body = json.dumps({"user_id": "u1", "key": "k", "value": "v" * TEN_MB}).encode()
    response = await api.client.post(path, content=body, headers={**api.auth, **JSON})
    _clear(response, 413, "CONFIDE_MAX_BODY_BYTES")
    await _still_serves(api)
    listed = await api.client.get("/v1/memories", params={"user_id": "u1"}, headers=api.auth)
    assert listed.json()["memories"] == []


@pytest.mark.asyncio
async def test_a_huge_message_cursor_is_a_400_naming_it(api: Api) -> None:
    # Before the bound, SQLite raised OverflowError (a 500) for a cursor past 64 bits.
    for cursor in (2**63, 10**30):
        response = await api.client.get(
            "/v1/conversations/c1/messages",
            params={"user_id": "u1", "cursor": str(cursor)},
            headers=api.auth,
        )
        _clear(response, 400, "cursor")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("top_k", 10**30),
        ("top_k", 2**63),
        ("top_k", 0),
        ("budget_tokens", 10**30),
        ("budget_tokens", 0),
        ("threshold", 10**308),
    ],
)
async def test_out_of_range_query_numbers_are_a_400_naming_the_field(
    api: Api, field: str, value: int
) -> None:
    body = {"user_id": "u1", "query": "dog", field: value}
    _clear(await api.post("/v1/memory_query", body), 400, field)
    await _still_serves(api)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/memories", {"user_id": "u1", "key": "k", "value": "v", "owner": "someone"}),
        ("/v1/memory_query", {"user_id": "u1", "query": "dog", "account_id": "other"}),
        ("/v1/conversations/c1/messages", {"user_id": "u1", "role": "user", "content": "hi",
                                            "account_id": "other"}),
    ],
)  # fmt: skip
async def test_unknown_fields_on_v1_routes_are_a_400_naming_them(
    api: Api, path: str, body: dict[str, object]
) -> None:
    response = await api.post(path, body)
    assert response.status_code == 400, response.text
    unknown = next(k for k in body if k not in ("user_id", "key", "value", "query", "role",
                                                "content"))  # fmt: skip
    assert unknown in response.json()["fields"]
    await _still_serves(api)


@pytest.mark.asyncio
async def test_voice_bridge_bodies_ignore_unknown_fields_and_write_only_what_they_know(
    api: Api,
) -> None:
    # The bridge contract tolerates fields it does not know (bridges add their own); an
    # unknown field never reaches the store.
    response = await api.post(
        "/sessions", {"accountId": ACCOUNT, "lineId": "line-9", "accountIdOverride": "other"}
    )
    assert response.status_code == 200
    sid = response.json()["callSessionId"]
    row = api.app.state.services.session_of(sid, account_id=ACCOUNT)
    assert (row.account_id, row.user_id) == (ACCOUNT, "line-9")


def _socket_app(engine: MemoryEngine, settings: Settings) -> tuple[object, str]:
    app = create_app(settings.model_copy(update={"min_session_seconds": 0.0}), engine=engine)
    return app, app.state.services.keys.create(ACCOUNT)


TRANSCRIPT = "conversation.item.input_audio_transcription.completed"
HOSTILE_EVENTS: list[str | bytes] = [
    "not json at all",
    "[1, 2, 3]",
    "42",
    '"a string"',
    "null",
    json.dumps({"no": "type"}),
    json.dumps({"type": 7}),
    json.dumps({"type": TRANSCRIPT, "transcript": {"nested": ["object"]}}),
    json.dumps({"type": TRANSCRIPT, "transcript": 12345}),
    json.dumps({"type": TRANSCRIPT, "transcript": "x" * 2_000_000}),
    json.dumps({"type": TRANSCRIPT, "transcript": "bad \ud800 surrogate"}),
    json.dumps({"type": TRANSCRIPT, "transcript": "nul \u0000 inside"}),
    json.dumps({"type": "response.done", "response": "not an object"}),
    json.dumps({"type": "response.done", "response": {"output": [{"content": 5}]}}),
    json.dumps({"type": "response.output_item.added", "item": [1]}),
    json.dumps({"type": "response.function_call_arguments.done", "name": "memory_query"}),
    json.dumps(
        {
            "type": "response.function_call_arguments.done",
            "call_id": "c1",
            "name": "memory_query",
            "arguments": "{not json",
        }
    ),
    json.dumps(
        {
            "type": "response.function_call_arguments.done",
            "call_id": ["not", "a", "string"],
            "name": "no_such_tool",
            "arguments": "{}",
        }
    ),
    json.dumps(
        {
            "type": "response.function_call_arguments.done",
            "call_id": "c2",
            "name": "memory_query",
            "arguments": json.dumps({"query": "dog", "top_k": 10**30}),
        }
    ),
    "{" * 50 + "}" * 50,
    b"\xff\xfe binary frame",
]


def test_the_realtime_socket_survives_malformed_events_and_floods(
    engine: MemoryEngine, settings: Settings
) -> None:
    app, token = _socket_app(engine, settings)
    auth = {"Authorization": f"Bearer {token}"}
    with serve_on_loopback(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        sid = client.post(
            "/sessions", json={"accountId": ACCOUNT, "lineId": "line-ws"}, headers=auth
        ).json()["callSessionId"]
        url = base.replace("http://", "ws://") + f"/sessions/{sid}/realtime"
        with connect(url, additional_headers=auth, max_size=None) as socket:
            assert json.loads(socket.recv(timeout=30))["type"] == "session.update"
            for event in HOSTILE_EVENTS:
                socket.send(event)
            # A flood of ordinary events, then a tool call: the socket still answers it.
            for n in range(2_000):
                socket.send(json.dumps({"type": "response.created", "n": n}))
            socket.send(
                json.dumps(
                    {
                        "type": "response.function_call_arguments.done",
                        "call_id": "after",
                        "name": "memory_query",
                        "arguments": json.dumps({"query": "dog"}),
                    }
                )
            )
            answers = []
            while True:
                answer = json.loads(socket.recv(timeout=30))
                answers.append(answer)
                if answer.get("item", {}).get("call_id") == "after":
                    break
            assert all(
                a["type"] in ("conversation.item.create", "response.create") for a in answers
            )
        # Meanwhile and afterwards, HTTP answers.
        status = client.get(f"/sessions/{sid}", headers=auth)
        assert status.status_code == 200
        assert client.get("/healthz").status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("/v1/subjects/a%00b/facts?user_id=u1", "path"),
        ("/v1/memories?user_id=u%001", "query string"),
        ("/v1/memories/m%00/history", "path"),
    ],
)
async def test_a_nul_in_the_url_is_a_400_naming_where(api: Api, url: str, named: str) -> None:
    # Before the check, PostgreSQL refused the NUL inside the route (a 503 for a client
    # mistake); SQLite took it.
    _clear(await api.client.get(url, headers=api.auth), 400, "NUL", named)
    await _still_serves(api)
