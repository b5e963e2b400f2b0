"""``DELETE /v1/users/{id}``: erasure over HTTP, for admin keys only, while serving."""

from __future__ import annotations

import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.server.auth import ApiKeys

pytestmark = pytest.mark.asyncio


async def test_erasing_needs_an_admin_key(api: Api) -> None:
    created = await api.post("/v1/memories", {"user_id": "u-1", "key": "k", "value": "v"})
    assert created.status_code == 201, created.text
    response = await api.client.delete("/v1/users/u-1", headers=api.auth)
    assert response.status_code == 403
    assert response.json() == {
        "success": False,
        "error": "erasing a user needs an API key with the admin scope",
        "type": "PermissionDeniedError",
    }
    assert (
        await api.client.get(f"/v1/memories/{created.json()['id']}", headers=api.auth)
    ).status_code == 200


async def test_erasure_returns_the_receipt_and_the_user_starts_afresh(api: Api) -> None:
    keys: ApiKeys = api.app.state.services.keys
    admin = {"Authorization": f"Bearer {keys.create(ACCOUNT, admin=True)}"}
    first = await api.post("/v1/memories", {"user_id": "u-1", "key": "k", "value": "before"})
    assert first.status_code == 201
    await api.post("/v1/memories", {"user_id": "u-2", "key": "k", "value": "bystander"})

    response = await api.client.delete("/v1/users/u-1", headers=admin)
    assert response.status_code == 200, response.text
    receipt = response.json()
    assert receipt["user_id"] == "u-1" and receipt["account_id"] == ACCOUNT
    assert len(receipt["key_ids_destroyed"]) == 1 and receipt["deleted"]["memories"] == 1
    assert set(receipt["scrubbed"]) == {"data", "keys"}

    listed = await api.client.get("/v1/memories", params={"user_id": "u-1"}, headers=api.auth)
    assert listed.status_code == 200 and listed.json()["memories"] == []
    again = await api.post("/v1/memories", {"user_id": "u-1", "key": "k", "value": "after"})
    assert again.status_code == 201
    listed = await api.client.get("/v1/memories", params={"user_id": "u-1"}, headers=api.auth)
    assert [m["value"] for m in listed.json()["memories"]] == ["after"]
    other = await api.client.get("/v1/memories", params={"user_id": "u-2"}, headers=api.auth)
    assert [m["value"] for m in other.json()["memories"]] == ["bystander"]
