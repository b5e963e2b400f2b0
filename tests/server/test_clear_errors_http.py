"""A request in the wrong shape is told what to send."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.asyncio


async def test_a_body_that_is_not_json_is_told_to_send_json(api: Api) -> None:
    answer = await api.client.post(
        "/v1/memories",
        content="user_id=u1&key=tea&value=green",
        headers={**api.auth, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == (
        "Send the body as JSON, with the header Content-Type: application/json"
    )
    assert answer.json()["type"] == "ValidationError"


async def test_a_key_without_the_bearer_scheme_is_told_the_header_to_send(api: Api) -> None:
    bare = await api.client.get(
        "/v1/memories", params={"user_id": "u1"}, headers={"Authorization": api.token}
    )
    assert bare.status_code == 401
    assert bare.json()["error"] == "Send the API key as the header Authorization: Bearer <key>"
    missing = await api.client.get("/v1/memories", params={"user_id": "u1"})
    assert missing.status_code == 401
    assert "Authorization: Bearer <key>" in missing.json()["error"]
