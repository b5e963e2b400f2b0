"""Error answers name the fields at fault, and the OpenAPI document says what each body needs."""

from __future__ import annotations

from typing import Any

import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.types import MemoryType

pytestmark = pytest.mark.asyncio

TYPES = [t.value for t in MemoryType]


def body(session_id: str, **fields: object) -> dict[str, object]:
    return {"callSessionId": session_id, "lineId": "line-1", "accountId": ACCOUNT, **fields}


async def test_missing_call_fields_are_named_as_the_request_spells_them(api: Api) -> None:
    response = await api.post(
        "/tools/store_memory", {"memoryType": "fact", "key": "k", "value": "v"}
    )
    assert response.status_code == 400
    assert response.json() == {
        "success": False,
        "error": "Missing required fields",
        "type": "ValidationError",
        "fields": ["callSessionId", "lineId", "accountId"],
    }


async def test_a_blank_value_counts_as_missing(api: Api) -> None:
    sid = await api.session()
    response = await api.post("/tools/store_memory", body(sid, memoryType="", key=" ", value="v"))
    assert response.json()["fields"] == ["memoryType", "key"]


async def test_an_unknown_memory_type_names_memory_type_and_lists_the_allowed_values(
    api: Api,
) -> None:
    sid = await api.session()
    response = await api.post(
        "/tools/store_memory", body(sid, memoryType="facts", key="k", value="v")
    )
    assert response.status_code == 400
    answer = response.json()
    assert answer["fields"] == ["memoryType"]
    assert answer["allowed"] == {"memoryType": TYPES}
    assert answer["error"] == (
        "store_memory: invalid arguments: memoryType: Input should be "
        + ", ".join(f"'{t}'" for t in TYPES[:-1])
        + f" or '{TYPES[-1]}'"
    )
    assert "memory_type" not in response.text and "facts" not in response.text


async def test_update_memory_names_its_own_fields(api: Api) -> None:
    sid = await api.session()
    response = await api.post(
        "/tools/update_memory",
        body(sid, existingKey="k", newValue="v", memoryType="gossip", confidence=5),
    )
    answer = response.json()
    assert response.status_code == 400
    assert answer["fields"] == ["memoryType", "confidence"]
    assert answer["allowed"] == {"memoryType": TYPES}
    assert answer["error"].startswith("update_memory: invalid arguments: memoryType: Input should")
    assert "; confidence: Input should be less than or equal to 1" in answer["error"]


async def test_a_field_of_the_wrong_type_is_named(api: Api) -> None:
    sid = await api.session()
    response = await api.post(
        "/tools/store_memory", body(sid, memoryType="fact", key="k", value="v", confidence="x")
    )
    assert response.status_code == 400
    assert response.json()["fields"] == ["confidence"]
    assert "allowed" not in response.json()


async def test_session_routes_name_what_is_missing(api: Api) -> None:
    created = await api.post("/sessions", {"accountId": ACCOUNT})
    assert created.status_code == 400
    assert created.json() == {
        "success": False,
        "error": "Missing required fields",
        "type": "ValidationError",
        "fields": ["lineId"],
    }
    sid = await api.session()
    turn = await api.post(f"/sessions/{sid}/turns", {"speaker": "user"})
    assert turn.json() == {
        "success": False,
        "error": "Missing required fields",
        "type": "ValidationError",
        "fields": ["text"],
    }


async def test_an_unknown_speaker_lists_the_allowed_speakers(api: Api) -> None:
    sid = await api.session()
    response = await api.post(f"/sessions/{sid}/turns", {"speaker": "caller", "text": "hi"})
    assert response.status_code == 400
    answer = response.json()
    assert answer["fields"] == ["speaker"]
    assert answer["allowed"] == {"speaker": ["user", "assistant"]}
    assert answer["error"].startswith("Invalid request: speaker: ")


async def test_the_contract_strings_are_unchanged(api: Api) -> None:
    response = await api.post(
        "/tools/store_memory", body("no-such-session", memoryType="fact", key="k", value="v")
    )
    assert response.status_code == 404
    # The voice bridge's shape, extended with the error's class (the same on every door).
    assert response.json() == {
        "success": False,
        "error": "Call session not found",
        "type": "NotFoundError",
    }


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = str(ref).rsplit("/", 1)[-1]
    resolved: dict[str, Any] = spec["components"]["schemas"][name]
    return resolved


async def test_every_request_body_has_an_example_and_its_required_fields(api: Api) -> None:
    spec: dict[str, Any] = api.app.openapi()
    seen = set()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if "requestBody" not in operation:
                continue
            seen.add(f"{method.upper()} {path}")
            media = operation["requestBody"]["content"]["application/json"]
            schema = _resolve(spec, media["schema"])
            assert isinstance(schema.get("required"), list), (method, path)
            examples = schema.get("examples") or list(media.get("examples", {}).values())
            assert examples, (method, path)
            example = examples[0]
            assert set(schema["required"]) <= set(example), (method, path)
            assert set(example) <= set(schema["properties"]), (method, path)
    assert {
        "POST /tools/store_memory", "POST /tools/update_memory", "POST /tools/forget_memory",
        "POST /tools/mark_private", "POST /sessions", "POST /sessions/{call_session_id}/turns",
        "POST /v1/memories", "PATCH /v1/memories/{memory_id}", "POST /v1/memory_query",
    } <= seen  # fmt: skip
    store = _resolve(spec, {"$ref": "#/components/schemas/StoreMemoryBody"})
    assert store["required"] == ["callSessionId", "lineId", "accountId", "memoryType", "key",
                                 "value"]  # fmt: skip


async def test_the_documented_examples_are_accepted(api: Api) -> None:
    spec: dict[str, Any] = api.app.openapi()
    schemas = spec["components"]["schemas"]
    sid = await api.session()
    store = {**schemas["StoreMemoryBody"]["examples"][0], "callSessionId": sid, "lineId": "line-1",
             "accountId": ACCOUNT}  # fmt: skip
    assert (await api.post("/tools/store_memory", store)).status_code == 200
    turn = schemas["TurnBody"]["examples"][0]
    assert (await api.post(f"/sessions/{sid}/turns", turn)).status_code == 200
    created = schemas["CreateSessionBody"]["examples"][0]
    assert (await api.post("/sessions", {**created, "accountId": ACCOUNT})).status_code == 200
    new = schemas["NewMemoryBody"]["examples"][0]
    assert (await api.post("/v1/memories", new)).status_code == 201
