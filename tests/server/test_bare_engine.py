"""A service over a bare engine (``create_app(engine=...)``) on a store indexed with vectors."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.asyncio


async def test_writes_are_refused_with_a_message_and_reads_still_work(api: Api) -> None:
    created = await api.post("/v1/memories", {"user_id": "u1", "key": "tea", "value": "green"})
    assert created.status_code == 201, created.text
    api.app.state.services.engine.storage.bind_embedder("hashing", 64)

    refused = await api.post("/v1/memories", {"user_id": "u1", "key": "pet", "value": "a cat"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["success"] is False
    assert "Confide.open" in refused.json()["error"]
    memory_id = created.json()["id"]
    read = await api.client.get(f"/v1/memories/{memory_id}", headers=api.auth)
    assert read.status_code == 200, read.text
    assert read.json()["value"] == "green"
