"""``/v1/users``: the account's users (never apps' internal owners), and erasure over HTTP,
for admin keys only, while serving."""

from __future__ import annotations

import asyncio

import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.engine import MemoryEngine
from confide.server.auth import ApiKeys
from confide.types import APP_OWNER_PREFIX

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


async def test_the_users_list_hides_apps_internal_owners_from_every_key(
    api: Api, engine: MemoryEngine
) -> None:
    keys: ApiKeys = api.app.state.services.keys
    admin = {"Authorization": f"Bearer {keys.create(ACCOUNT, admin=True)}"}
    reader = {"Authorization": f"Bearer {keys.create(ACCOUNT, scope='read')}"}
    assert (await api.post("/v1/memories", {"user_id": "u-1", "key": "k", "value": "v"})).is_success
    app_memory = {
        "account_id": ACCOUNT,
        "user_id": f"{APP_OWNER_PREFIX}notes",
        "app_id": "notes",
        "key": "summary",
        "value": "The team ships on Friday.",
    }
    await asyncio.to_thread(engine.store, app_memory)
    assert await asyncio.to_thread(engine.storage.user_ids, ACCOUNT) == ["app:notes", "u-1"]
    for headers in (api.auth, admin, reader):
        response = await api.client.get("/v1/users", headers=headers)
        assert response.status_code == 200, response.text
        assert response.json() == {"users": ["u-1"]}


async def test_an_erasure_can_be_looked_up_by_its_id_by_its_accounts_admins_only(
    api: Api,
) -> None:
    keys: ApiKeys = api.app.state.services.keys
    admin = {"Authorization": f"Bearer {keys.create(ACCOUNT, admin=True)}"}
    stranger = {"Authorization": f"Bearer {keys.create('another-account', admin=True)}"}
    await api.post("/v1/memories", {"user_id": "u-1", "key": "k", "value": "to be erased"})
    receipt = (await api.client.delete("/v1/users/u-1", headers=admin)).json()
    assert receipt["status"] in {"verified", "scrubbed"} and receipt["id"]
    assert receipt["markers"]["key_ids"] == receipt["key_ids_destroyed"]

    looked_up = await api.client.get(f"/v1/erasures/{receipt['id']}", headers=admin)
    assert looked_up.status_code == 200, looked_up.text
    assert looked_up.json()["status"] == receipt["status"]
    assert looked_up.json()["kind"] == "erasure" and "u-1" not in looked_up.text
    assert (
        await api.client.get(f"/v1/erasures/{receipt['id']}", headers=api.auth)
    ).status_code == 403
    assert (
        await api.client.get(f"/v1/erasures/{receipt['id']}", headers=stranger)
    ).status_code == 404
    assert (await api.client.get("/v1/erasures/no-such-id", headers=admin)).status_code == 404
    metrics = await api.client.get("/metrics", headers=admin)
    assert "confide_scrubs_pending 0.0" in metrics.text
