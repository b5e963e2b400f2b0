"""Hostile bodies get a clear 4xx and leave the service as it was: size, encoding, nesting,
surrogates, NUL characters and out-of-range numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.config import Settings
from confide.conversation.buffer import SessionBuffer
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.server.guard import MAX_JSON_DEPTH, json_problem

JSON = {"content-type": "application/json"}


async def _raw(api: Api, path: str, body: bytes) -> tuple[int, dict[str, object]]:
    response = await api.client.post(path, content=body, headers={**api.auth, **JSON})
    return response.status_code, response.json()


async def _still_serves(api: Api) -> None:
    response = await api.client.get("/v1/memories", params={"user_id": "u1"}, headers=api.auth)
    assert response.status_code == 200


@pytest.mark.asyncio
async def test_a_body_over_the_limit_is_refused_with_the_limit(api: Api) -> None:
    line = "x" * (2 * 1024 * 1024)
    status, body = await _raw(
        api, "/sessions", f'{{"accountId": "{ACCOUNT}", "lineId": "{line}"}}'.encode()
    )
    assert status == 413
    assert "1048576 bytes" in str(body["error"])
    assert "CONFIDE_MAX_BODY_BYTES" in str(body["error"])
    await _still_serves(api)
    assert len(api.app.state.services.buffer) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"accountId": "acct-1", "lineId": "l\\ud800"}', "lone surrogate"),
        (b'{"accountId": "acct-1", "lineId": "l\\u0000"}', "NUL"),
        (b'{"accountId": "acct-1", "lineId": "\xff\xfe"}', "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b'{"a": ' * 40 + b"1" + b"}" * 40, "nested deeper"),
    ],
)
async def test_unusable_json_is_a_400_that_names_the_problem(
    api: Api, body: bytes, named: str
) -> None:
    status, answer = await _raw(api, "/sessions", body)
    assert status == 400
    assert answer["success"] is False
    assert named in str(answer["error"])
    await _still_serves(api)


@pytest.mark.asyncio
async def test_a_surrogate_in_a_memory_value_writes_nothing(api: Api) -> None:
    body = b'{"user_id": "u1", "key": "k", "value": "bad \\udc80 value"}'
    status, _ = await _raw(api, "/v1/memories", body)
    assert status == 400
    listed = await api.client.get("/v1/memories", params={"user_id": "u1"}, headers=api.auth)
    assert listed.json()["memories"] == []


@pytest.mark.asyncio
async def test_numbers_beyond_any_listing_are_a_400(api: Api) -> None:
    for offset in (2**63, 10**30):
        response = await api.client.get(
            "/v1/memories", params={"user_id": "u1", "offset": str(offset)}, headers=api.auth
        )
        assert response.status_code == 400
        assert "offset" in response.json()["error"]


def test_the_checks_see_keys_and_deep_values() -> None:
    assert json_problem({"ok": ["fine", {"nested": "text"}]}) is None
    assert json_problem({"bad\ud800key": 1}) is not None
    deep: object = "leaf"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    assert json_problem(deep) is None
    assert json_problem([deep]) is not None


@pytest.mark.asyncio
async def test_voice_bridge_strings_are_bounded(api: Api) -> None:
    too_long = "l" * 300
    response = await api.post("/sessions", {"accountId": ACCOUNT, "lineId": too_long})
    assert response.status_code == 400
    assert response.json()["fields"] == ["lineId"]
    assert len(api.app.state.services.buffer) == 0


@pytest.mark.asyncio
async def test_evicted_sessions_are_counted_in_the_metrics(api: Api) -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    services = api.app.state.services
    services.buffer = SessionBuffer(clock=lambda: now[0])
    await api.session("line-evicted")
    now[0] += timedelta(minutes=31)
    assert services.buffer.evict_idle() == 1
    metrics = await api.client.get("/metrics", headers=api.auth)
    assert "confide_sessions_evicted_total 1" in metrics.text


@pytest.mark.asyncio
async def test_metrics_need_a_key_unless_made_public(
    engine: MemoryEngine, settings: Settings
) -> None:
    for public, anonymous in ((False, 401), (True, 200)):
        app = create_app(settings.model_copy(update={"metrics_public": public}), engine=engine)
        token = app.state.services.keys.create(ACCOUNT)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            assert (await client.get("/metrics")).status_code == anonymous
            keyed = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert keyed.status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("docs", "host", "served"),
    [
        ("auto", "127.0.0.1", True),
        ("auto", None, True),
        ("auto", "0.0.0.0", False),
        ("on", "0.0.0.0", True),
        ("off", "127.0.0.1", False),
    ],
)
async def test_api_docs_are_served_on_loopback_unless_configured(
    engine: MemoryEngine, settings: Settings, docs: str, host: str | None, served: bool
) -> None:
    app = create_app(settings.model_copy(update={"api_docs": docs}), engine=engine, bind_host=host)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert (await client.get(path)).status_code == (200 if served else 404), path
