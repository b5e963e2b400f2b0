"""A memory stored over REST without a key gets the SDK's default: the next free note key."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.asyncio


async def test_a_memory_without_a_key_gets_the_next_free_note_key(api: Api) -> None:
    keys = []
    for value in ("Ann grows tomatoes.", "Ann walks at dawn."):
        stored = await api.post("/v1/memories", {"user_id": "ann", "value": value})
        assert stored.status_code == 201, stored.text
        keys.append(stored.json()["key"])
    assert keys == ["note", "note.2"]
    named = await api.post("/v1/memories", {"user_id": "ann", "key": "pet", "value": "a cat"})
    assert named.json()["key"] == "pet"


async def test_an_invalid_type_without_a_key_is_refused_for_its_type(api: Api) -> None:
    refused = await api.post("/v1/memories", {"user_id": "ann", "value": "x", "type": "nope"})
    assert refused.status_code == 400
    assert refused.json()["fields"] == ["type"]


@pytest.mark.parametrize("owner", ["", "u" * 300])
async def test_an_invalid_owner_without_a_key_is_refused_for_its_user_id(
    api: Api, owner: str
) -> None:
    refused = await api.post("/v1/memories", {"user_id": owner, "value": "Ann grows tomatoes."})
    assert refused.status_code == 400, refused.text
    assert refused.json()["fields"] == ["user_id"]
