"""The service over a real socket: uvicorn on 127.0.0.1, httpx as the client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.testing.loopback import serve_on_loopback


@pytest.fixture
def served(engine: MemoryEngine, settings: Settings) -> Iterator[tuple[str, str]]:
    app = create_app(settings, engine=engine)
    token = app.state.services.keys.create("acct-1")
    with serve_on_loopback(app) as base:
        yield base, token


def test_tool_call_round_trip_over_a_real_socket(served: tuple[str, str]) -> None:
    base, token = served
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, timeout=30) as client:
        sid = client.post(
            "/sessions", json={"accountId": "acct-1", "lineId": "l1"}, headers=auth
        ).json()["callSessionId"]
        stored = client.post(
            "/tools/store_memory",
            json={"callSessionId": sid, "lineId": "l1", "accountId": "acct-1",
                  "memoryType": "fact", "key": "home_town", "value": "Lisbon"},
            headers=auth,
        )  # fmt: skip
        assert stored.status_code == 200 and stored.json()["success"] is True
        assert client.post(f"/sessions/{sid}/end", headers=auth).json() == {
            "summarization": "skipped",
            "reason": "session never connected (POST /sessions/{id}/connected)",
        }
        listing = client.get("/v1/memories", params={"user_id": "l1"}, headers=auth).json()
        assert [m["value"] for m in listing["memories"]] == ["Lisbon"]
        assert client.get("/v1/memories", params={"user_id": "l1"}).status_code == 401
