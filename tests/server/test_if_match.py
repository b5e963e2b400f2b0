"""``PATCH /v1/memories/{id}`` with ``If-Match``: an update only of the version the client read."""

from __future__ import annotations

import httpx
import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.asyncio


async def _get(api: Api, memory_id: str) -> httpx.Response:
    response = await api.client.get(f"/v1/memories/{memory_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response


async def _patch(api: Api, memory_id: str, value: str, if_match: str | None) -> httpx.Response:
    headers = api.auth if if_match is None else {**api.auth, "If-Match": if_match}
    return await api.client.patch(
        f"/v1/memories/{memory_id}", json={"value": value}, headers=headers
    )


def _is_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"success", "error", "type"} and body["success"] is False
    assert (
        body["type"]
        == {
            400: "ValidationError",
            409: "ConflictError",
            412: "PreconditionFailedError",
        }[status]
    )
    assert "Traceback" not in body["error"]
    return str(body["error"])


async def test_patch_with_a_stale_if_match_is_refused(api: Api) -> None:
    created = await api.post("/v1/memories", {"user_id": "u9", "key": "tea", "value": "green"})
    mid = created.json()["id"]
    assert created.json()["row_version"] == 1
    read = (await _get(api, mid)).headers["ETag"]
    assert read == '"1"'
    # Another client forgets and restores it: same id and state, not the version read.
    await api.client.delete(f"/v1/memories/{mid}", headers=api.auth)
    await api.post(f"/v1/memories/{mid}/restore")
    assert "read it and retry" in _is_error(await _patch(api, mid, "oolong", read), 412)
    current = await _get(api, mid)
    assert current.json()["value"] == "green" and current.json()["version"] == 1

    patched = await _patch(api, mid, "oolong", current.headers["ETag"])
    assert patched.status_code == 200, patched.text
    new = patched.json()
    assert (new["version"], new["value"], new["row_version"]) == (2, "oolong", 1)
    assert patched.headers["ETag"] == '"1"'
    assert patched.headers["Content-Location"] == f"/v1/memories/{new['id']}"
    # The tag read before the update names a version that is no longer the current one.
    _is_error(await _patch(api, mid, "sencha", current.headers["ETag"]), 412)
    third = await _patch(api, new["id"], "sencha", patched.headers["ETag"])
    assert third.status_code == 200 and third.json()["version"] == 3


async def test_if_match_forms(api: Api) -> None:
    created = await api.post("/v1/memories", {"user_id": "u9", "key": "tea", "value": "green"})
    first = await _patch(api, created.json()["id"], "oolong", "*")  # any version
    assert first.status_code == 200, first.text
    second = await _patch(api, first.json()["id"], "sencha", "1")  # a bare row version
    assert second.status_code == 200 and second.json()["version"] == 3
    head = second.json()["id"]
    _is_error(await _patch(api, head, "x", 'W/"1"'), 412)  # If-Match compares strongly
    assert "If-Match" in _is_error(await _patch(api, head, "x", '"1", "2"'), 400)
    assert "If-Match" in _is_error(await _patch(api, head, "x", "latest"), 400)
    assert (await _get(api, head)).json()["value"] == "sencha"


async def test_if_match_of_a_forgotten_memory_is_a_state_conflict(api: Api) -> None:
    created = await api.post("/v1/memories", {"user_id": "u9", "key": "tea", "value": "green"})
    mid = created.json()["id"]
    forgotten = await api.client.delete(f"/v1/memories/{mid}", headers=api.auth)
    assert forgotten.headers["ETag"] == '"2"'
    assert "restore it first" in _is_error(
        await _patch(api, mid, "oolong", forgotten.headers["ETag"]), 409
    )


async def test_openapi_documents_if_match(api: Api) -> None:
    spec = (await api.client.get("/openapi.json")).json()
    patch = spec["paths"]["/v1/memories/{memory_id}"]["patch"]
    headers = {p["name"]: p for p in patch["parameters"] if p["in"] == "header"}
    assert "if-match" in headers and "ETag" in headers["if-match"]["description"]
    assert {"409", "412"} <= set(patch["responses"])
