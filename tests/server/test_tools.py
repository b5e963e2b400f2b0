"""The voice-bridge tool routes, in process, on both backends."""

from __future__ import annotations

import pytest
from tests.server.conftest import ACCOUNT, Api

pytestmark = pytest.mark.asyncio


def body(session_id: str, **fields: object) -> dict[str, object]:
    return {"callSessionId": session_id, "lineId": "line-1", "accountId": ACCOUNT, **fields}


async def test_store_then_list_returns_the_memory(api: Api) -> None:
    sid = await api.session()
    response = await api.post(
        "/tools/store_memory",
        body(sid, memoryType="fact", key="daughter_name", value="Sarah", confidence=0.9),
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["success"] is True and answer["memoryId"]
    assert "error" not in answer and "suggestReminder" not in answer
    listing = await api.client.get("/v1/memories", params={"user_id": "line-1"}, headers=api.auth)
    memories = listing.json()["memories"]
    assert [(m["key"], m["value"], m["version"]) for m in memories] == [
        ("daughter_name", "Sarah", 1)
    ]
    assert set(memories[0]) >= {
        "id", "type", "key", "value", "confidence", "visibility", "version",
        "created_at", "updated_at",
    }  # fmt: skip


async def test_follow_up_with_reminder_offers_one(api: Api) -> None:
    sid = await api.session()
    answer = (
        await api.post(
            "/tools/store_memory",
            body(sid, memoryType="follow_up", key="appointment_doctor",
                 value="doctor on Tuesday at 10am", suggestReminder=True),
        )
    ).json()  # fmt: skip
    assert answer["suggestReminder"] is True
    assert "remind" in answer["message"].lower()


async def test_update_matches_key_case_insensitively_or_creates(api: Api) -> None:
    sid = await api.session()
    await api.post("/tools/store_memory", body(sid, memoryType="fact", key="car", value="Volvo"))
    updated = (
        await api.post("/tools/update_memory", body(sid, existingKey="CAR", newValue="Saab"))
    ).json()
    assert updated["action"] == "updated"
    created = (
        await api.post(
            "/tools/update_memory",
            body(sid, existingKey="favorite_tea", newValue="green tea", memoryType="preference"),
        )
    ).json()
    assert created["action"] == "created"
    listing = await api.client.get("/v1/memories", params={"user_id": "line-1"}, headers=api.auth)
    by_key = {m["key"]: m for m in listing.json()["memories"]}
    assert by_key["car"]["value"] == "Saab" and by_key["car"]["version"] == 2
    assert by_key["favorite_tea"]["type"] == "preference"


async def test_forget_and_mark_private_by_key_and_id(api: Api) -> None:
    sid = await api.session()
    first = (
        await api.post(
            "/tools/store_memory", body(sid, memoryType="fact", key="pet", value="a cat")
        )
    ).json()
    await api.post("/tools/store_memory", body(sid, memoryType="fact", key="car", value="a Volvo"))
    private = await api.post("/tools/mark_private", body(sid, memoryId=first["memoryId"]))
    assert private.status_code == 200 and private.json()["success"] is True
    forgotten = await api.post("/tools/forget_memory", body(sid, key="CAR"))
    assert forgotten.status_code == 200
    listing = await api.client.get("/v1/memories", params={"user_id": "line-1"}, headers=api.auth)
    memories = listing.json()["memories"]
    assert [(m["key"], m["visibility"]) for m in memories] == [("pet", "private")]
    missing = await api.post("/tools/forget_memory", body(sid, key="car"))
    assert missing.status_code == 404 and missing.json()["success"] is False


async def test_near_identical_store_is_not_stored_twice(api: Api) -> None:
    sid = await api.session()
    one = (
        await api.post(
            "/tools/store_memory",
            body(sid, memoryType="preference", key="likes_gardening", value="Loves gardening."),
        )
    ).json()
    two = (
        await api.post(
            "/tools/store_memory",
            body(sid, memoryType="preference", key="likes_gardening_", value="loves gardening"),
        )
    ).json()
    assert two["memoryId"] == one["memoryId"] and two["action"] == "duplicate"
    listing = await api.client.get("/v1/memories", params={"user_id": "line-1"}, headers=api.auth)
    assert len(listing.json()["memories"]) == 1


async def test_tool_calls_are_recorded_as_session_events_without_values(api: Api) -> None:
    sid = await api.session()
    await api.post(
        "/tools/store_memory", body(sid, memoryType="fact", key="hometown", value="Dublin")
    )
    tables = api.app.state.services.tables
    row = tables.get_session(sid, account_id=ACCOUNT)
    assert row.tool_calls == 1
    events = [e for e in tables.events(sid, account_id=ACCOUNT) if e.kind == "tool_call"]
    # The key is recorded blinded, as the memory row holds it.
    blinded = api.app.state.services.engine.blind_key(ACCOUNT, "hometown")
    assert [(e.tool, e.key, e.memory_type) for e in events] == [("store_memory", blinded, "fact")]
    assert events[0].memory_id
    assert "Dublin" not in repr(tables.events(sid, account_id=ACCOUNT)) + repr(row)


@pytest.mark.parametrize(
    ("path", "fields", "error", "missing"),
    [
        ("/tools/store_memory", {"memoryType": "fact", "key": "k"},
         "store_memory: invalid arguments: value: Field required", ["value"]),
        ("/tools/update_memory", {"existingKey": "k"},
         "update_memory: invalid arguments: newValue: Field required", ["newValue"]),
        ("/tools/forget_memory", {},
         "forget_memory: invalid arguments: give key or memoryId", ["key", "memoryId"]),
        ("/tools/mark_private", {"key": " "},
         "mark_private: invalid arguments: give key or memoryId", ["key", "memoryId"]),
    ],
)  # fmt: skip
async def test_missing_arguments_are_400_named_by_the_tool(
    api: Api, path: str, fields: dict[str, object], error: str, missing: list[str]
) -> None:
    sid = await api.session()
    response = await api.post(path, body(sid, **fields))
    assert response.status_code == 400
    assert response.json() == {
        "success": False,
        "error": error,
        "type": "ValidationError",
        "fields": missing,
    }


async def test_snake_case_arguments_are_accepted_and_named_as_given(api: Api) -> None:
    sid = await api.session()
    stored = await api.post(
        "/tools/store_memory", body(sid, memory_type="fact", key="pet", value="a cat")
    )
    assert stored.status_code == 200, stored.text
    bad = await api.post(
        "/tools/update_memory", body(sid, existing_key="pet", new_value="a dog", memory_type="x")
    )
    assert bad.status_code == 400
    assert bad.json()["fields"] == ["memory_type"]
    memory_id = stored.json()["memoryId"]
    forgotten = await api.post("/tools/forget_memory", body(sid, memory_id=memory_id))
    assert forgotten.json()["action"] == "forgotten"


async def test_other_tools_run_by_name_and_an_unknown_one_is_refused(api: Api) -> None:
    sid = await api.session()
    await api.post("/tools/store_memory", body(sid, memoryType="fact", key="pet", value="a cat"))
    history = await api.post("/tools/memory_history", body(sid, key="pet"))
    assert [e["event"] for e in history.json()["history"]] == ["ADD"]
    unknown = await api.post("/tools/no_such_tool", body(sid))
    assert unknown.status_code == 400
    assert unknown.json() == {
        "success": False,
        "error": "unknown tool 'no_such_tool'",
        "type": "ValidationError",
    }


async def test_unknown_session_is_404(api: Api) -> None:
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


async def test_invalid_values_are_400_not_500(api: Api) -> None:
    sid = await api.session()
    bad_type = await api.post(
        "/tools/store_memory", body(sid, memoryType="gossip", key="k", value="v")
    )
    bad_conf = await api.post(
        "/tools/store_memory", body(sid, memoryType="fact", key="k", value="v", confidence="x")
    )
    bad_key = await api.post(
        "/tools/store_memory", body(sid, memoryType="fact", key="no spaces!", value="v")
    )
    for response in (bad_type, bad_conf, bad_key):
        assert response.status_code == 400, response.text
        assert response.json()["success"] is False
        assert "Traceback" not in response.text


async def test_malformed_json_is_400_with_a_clear_message(api: Api) -> None:
    response = await api.client.post(
        "/tools/store_memory",
        content=b'{"callSessionId": ',
        headers={**api.auth, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json() == {
        "success": False,
        "error": "Malformed JSON body",
        "type": "ValidationError",
    }
