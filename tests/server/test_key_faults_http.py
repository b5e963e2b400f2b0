"""Through the service: a wrong or old key-encryption key, or a tampered row, is a typed JSON
error (503 or 409) with nothing of the data, never a 500."""

from __future__ import annotations

import httpx
import pytest
from tests.server.conftest import Api

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.storage.keystore import KeyStore
from confide.testing.conformance.harness import TEST_KEK

pytestmark = pytest.mark.asyncio

OTHER_KEK = bytes(range(7, 39))
SECRET = "the safe combination is 31-4-15"


async def _ask(engine: MemoryEngine, settings: Settings, token: str, path: str) -> httpx.Response:
    """One GET through a second process's service over the same stores."""
    app = create_app(settings, engine=engine)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        response = await client.get(path, headers={"Authorization": f"Bearer {token}"})
        await app.state.services.tasks.join()
    return response


@pytest.mark.parametrize(
    "ring",
    [
        pytest.param(KeyRing(primary=OTHER_KEK), id="wrong-kek"),
        pytest.param(
            KeyRing(primary=OTHER_KEK, former={KeyRing(primary=TEST_KEK).primary_id: OTHER_KEK}),
            id="wrong-kek-under-the-right-id",
        ),
    ],
)
async def test_a_wrong_kek_answers_503_without_data(
    api: Api, engine: MemoryEngine, key_store: KeyStore, settings: Settings, ring: KeyRing
) -> None:
    created = await api.post("/v1/memories", {"user_id": "line-1", "key": "safe", "value": SECRET})
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    stranger = MemoryEngine(engine.storage, ring, settings=settings, key_store=key_store)
    for path in (f"/v1/memories/{memory_id}", "/v1/memories?user_id=line-1"):
        response = await _ask(stranger, settings, api.token, path)
        assert response.status_code == 503, (path, response.text)
        assert response.json()["success"] is False
        assert "31-4-15" not in response.text and "Traceback" not in response.text


async def test_an_old_kek_after_rotation_answers_503(
    api: Api, engine: MemoryEngine, key_store: KeyStore, settings: Settings
) -> None:
    created = await api.post("/v1/memories", {"user_id": "line-1", "key": "safe", "value": SECRET})
    memory_id = created.json()["id"]
    engine.rotate_kek(KeyRing(primary=OTHER_KEK, former={engine.keyring.primary_id: TEST_KEK}))
    stale = MemoryEngine(engine.storage, KeyRing(primary=TEST_KEK), settings=settings,
                         key_store=key_store)  # fmt: skip
    response = await _ask(stale, settings, api.token, f"/v1/memories/{memory_id}")
    assert response.status_code == 503, response.text
    assert "31-4-15" not in response.text
