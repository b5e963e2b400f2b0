"""Call sessions: lifecycle, background extraction, proposals, auth and metrics."""

from __future__ import annotations

import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.conversation.extraction import ProposedChange
from confide.types import MemoryType

pytestmark = pytest.mark.asyncio


async def listing(api: Api, user: str = "line-1") -> dict[str, dict[str, object]]:
    response = await api.client.get("/v1/memories", params={"user_id": user}, headers=api.auth)
    assert response.status_code == 200, response.text
    return {m["key"]: m for m in response.json()["memories"]}


async def say(api: Api, sid: str, text: str, speaker: str = "user") -> None:
    response = await api.post(f"/sessions/{sid}/turns", {"speaker": speaker, "text": text})
    assert response.status_code == 200, response.text


async def test_end_schedules_offline_extraction_in_the_background(api: Api) -> None:
    sid = await api.session()
    await say(api, sid, "I live in Portland and I have a dog named Biscuit.")
    await say(api, sid, "That sounds lovely.", speaker="assistant")
    ended = await api.post(f"/sessions/{sid}/end")
    assert ended.status_code == 200 and ended.json() == {"summarization": "scheduled"}
    await api.join()
    stored = await listing(api)
    assert "city" not in stored  # a sensitive key, set for the first time: held
    assert stored["pet_dog_name"]["value"] == "Biscuit"
    row = api.app.state.services.tables.get_session(sid, account_id=ACCOUNT)
    assert row.memories_extracted == 1 and row.summarization == "done"
    pending = api.app.state.services.proposals.pending(account_id=ACCOUNT, user_id="line-1")
    assert [(p.key, p.current_value, p.proposed_value) for p in pending] == [
        ("city", None, "Portland")
    ]
    assert api.app.state.services.buffer.get(sid) is None


async def test_unconnected_reminder_or_short_sessions_are_skipped(api: Api) -> None:
    unconnected = await api.session(connected=False)
    await say(api, unconnected, "I live in Portland.")
    assert (await api.post(f"/sessions/{unconnected}/end")).json()["summarization"] == "skipped"
    reminder = (
        await api.post("/sessions", {"accountId": ACCOUNT, "lineId": "line-1",
                                     "isReminderCall": True})
    ).json()["callSessionId"]  # fmt: skip
    await api.post(f"/sessions/{reminder}/connected")
    await say(api, reminder, "I live in Portland.")
    assert (await api.post(f"/sessions/{reminder}/end")).json()["summarization"] == "skipped"
    services = api.app.state.services
    services.settings = services.settings.model_copy(update={"min_session_seconds": 3600.0})
    short = await api.session()
    await say(api, short, "I live in Portland.")
    assert (await api.post(f"/sessions/{short}/end")).json()["summarization"] == "skipped"
    await api.join()
    assert await listing(api) == {}
    assert services.buffer.get(short) is None


async def test_extraction_skips_keys_stored_during_the_session_and_duplicates(api: Api) -> None:
    sid = await api.session()
    await api.post(
        "/tools/store_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "memoryType": "fact", "key": "mobility", "value": "uses a cane"},
    )  # fmt: skip
    await api.post(
        "/tools/store_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "memoryType": "preference", "key": "like_gardening", "value": "gardening"},
    )  # fmt: skip
    await say(api, sid, "I use a walker. I love gardening.")
    await api.post(f"/sessions/{sid}/end")
    await api.join()
    stored = await listing(api)
    assert stored["mobility"]["value"] == "The user uses a cane"  # never updated by extraction
    assert "likes_gardening" not in stored  # near-identical to the tool's memory
    assert api.app.state.services.metrics.duplicates_skipped == 1


async def test_a_changed_sensitive_key_becomes_a_sealed_proposal_until_confirmed(
    api: Api,
) -> None:
    api.app.state.services.engine.store(
        {"account_id": ACCOUNT, "user_id": "line-1", "key": "city", "value": "Boston"}
    )
    second = await api.session()
    await say(api, second, "I live in Denver.")
    await api.post(f"/sessions/{second}/end")
    await api.join()
    assert (await listing(api))["city"]["value"] == "Boston"
    pending = (
        await api.client.get("/v1/proposals", params={"user_id": "line-1"}, headers=api.auth)
    ).json()["proposals"]
    assert [(p["key"], p["current_value"], p["proposed_value"]) for p in pending] == [
        ("city", "Boston", "Denver")
    ]
    row = api.app.state.services.tables.get_proposal(ACCOUNT, pending[0]["id"])
    assert b"Denver" not in row.ciphertext + row.wrapped_key
    confirmed = await api.post(f"/v1/proposals/{pending[0]['id']}/confirm")
    assert confirmed.status_code == 200 and confirmed.json()["value"] == "Denver"
    history = (
        await api.client.get(f"/v1/memories/{confirmed.json()['id']}/history", headers=api.auth)
    ).json()["history"]
    assert history[0]["actor"] == f"proposal:{pending[0]['id']}"
    decisions = [h["meta"].get("decision") for h in history if h["event"] == "PROPOSAL"]
    assert decisions == ["confirmed", "held"]  # the audit history records the decision
    assert [h["event"] for h in history][:2] == ["PROPOSAL", "UPDATE"]
    assert "Denver" not in str(history)
    again = await api.post(f"/v1/proposals/{pending[0]['id']}/confirm")
    assert again.status_code == 409


async def test_a_live_tool_call_restating_the_key_confirms_the_proposal(api: Api) -> None:
    services = api.app.state.services
    sid = await api.session()
    services.engine.store(
        {"account_id": ACCOUNT, "user_id": "line-1", "key": "preferred_name",
         "value": "Margaret", "type": "preference"}
    )  # fmt: skip
    await services.proposals.propose(
        ProposedChange(account_id=ACCOUNT, user_id="line-1", key="preferred_name",
                       current_value="Margaret", proposed_value="Maggie",
                       type=MemoryType.PREFERENCE, confidence=0.8, session_id=sid)
    )  # fmt: skip
    assert len(services.proposals.pending(account_id=ACCOUNT, user_id="line-1")) == 1
    answer = await api.post(
        "/tools/update_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "existingKey": "Preferred_Name", "newValue": "Maggie"},
    )  # fmt: skip
    assert answer.json()["action"] == "updated"
    assert services.proposals.pending(account_id=ACCOUNT, user_id="line-1") == []
    assert (await listing(api))["preferred_name"]["value"] == "Maggie"
    assert services.engine.op_counts(by="op").get("proposal_confirmed") == 1


async def test_keys_are_required_and_bound_to_one_account(api: Api) -> None:
    no_key = await api.client.post("/sessions", json={"accountId": ACCOUNT, "lineId": "l"})
    assert no_key.status_code == 401 and no_key.json()["success"] is False
    bad_key = await api.client.post(
        "/sessions",
        json={"accountId": ACCOUNT, "lineId": "l"},
        headers={"Authorization": f"Bearer {api.token[:-2]}xx"},
    )
    assert bad_key.status_code == 401
    other = await api.post("/sessions", {"accountId": "acct-2", "lineId": "l"})
    assert other.status_code == 403
    other_token = api.app.state.services.keys.create("acct-2")
    sid = await api.session()
    foreign = await api.client.post(
        "/tools/store_memory",
        json={"callSessionId": sid, "lineId": "line-1", "accountId": "acct-2",
              "memoryType": "fact", "key": "k", "value": "v"},
        headers={"Authorization": f"Bearer {other_token}"},
    )  # fmt: skip
    assert foreign.status_code == 404  # the session is not in acct-2
    listing_other = await api.client.get(
        "/v1/memories", params={"user_id": "line-1"},
        headers={"Authorization": f"Bearer {other_token}"},
    )  # fmt: skip
    assert listing_other.json() == {"memories": []}


async def test_keys_are_stored_hashed(api: Api) -> None:
    tables = api.app.state.services.tables
    _, key_id, secret = api.token.split("_", 2)  # the secret may itself contain "_"
    row = tables.get_api_key(key_id)
    assert row is not None and row.account_id == ACCOUNT
    assert api.token not in repr(row) and secret not in row.token_hash


async def test_metrics_report_writes_and_summaries(api: Api) -> None:
    sid = await api.session()
    await api.post(
        "/tools/store_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "memoryType": "fact", "key": "car", "value": "a Volvo"},
    )  # fmt: skip
    await api.post(
        "/tools/update_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "existingKey": "car", "newValue": "a Saab"},
    )  # fmt: skip
    await say(api, sid, "I have a dog named Biscuit.")
    await api.post(f"/sessions/{sid}/end")
    await api.join()
    text = (await api.client.get("/metrics", headers=api.auth)).text
    assert "confide_memories_stored_total 2" in text
    assert "confide_memories_updated_total 1" in text
    assert "confide_refresh_failures_total 0" in text
    assert "confide_summarization_duration_seconds_count 1" in text
    assert 'confide_memories_extracted_per_session_bucket{le="1"} 1' in text


async def test_rest_core_routes(api: Api) -> None:
    created = await api.post("/v1/memories", {"user_id": "u9", "key": "tea", "value": "green"})
    assert created.status_code == 201
    mid = created.json()["id"]
    patched = await api.client.patch(
        f"/v1/memories/{mid}", json={"value": "oolong"}, headers=api.auth
    )
    assert patched.json()["version"] == 2
    new_id = patched.json()["id"]
    deleted = await api.client.delete(f"/v1/memories/{new_id}", headers=api.auth)
    assert deleted.json()["state"] == "soft_deleted"
    restored = await api.post(f"/v1/memories/{new_id}/restore")
    assert restored.json()["state"] == "active"
    history = (await api.client.get(f"/v1/memories/{mid}/history", headers=api.auth)).json()
    assert [h["event"] for h in history["history"]] == ["RESTORE", "DELETE", "UPDATE", "ADD"]
    conflict = await api.post(f"/v1/memories/{new_id}/restore")
    assert conflict.status_code == 409
    missing = await api.client.get("/v1/memories/nope", headers=api.auth)
    assert missing.status_code == 404


async def test_openapi_describes_the_routes(api: Api) -> None:
    spec = (await api.client.get("/openapi.json")).json()
    for path in ("/tools/store_memory", "/tools/update_memory", "/tools/forget_memory",
                 "/tools/mark_private", "/sessions", "/sessions/{call_session_id}/end",
                 "/v1/memories", "/v1/proposals/{proposal_id}/confirm", "/metrics"):  # fmt: skip
        assert path in spec["paths"], path


async def test_a_skipped_end_says_why(api: Api) -> None:
    unconnected = await api.session(connected=False)
    ended = await api.post(f"/sessions/{unconnected}/end")
    assert ended.json() == {
        "summarization": "skipped",
        "reason": "session never connected (POST /sessions/{id}/connected)",
    }
    reminder = (
        await api.post("/sessions", {"accountId": ACCOUNT, "lineId": "line-1",
                                     "isReminderCall": True})
    ).json()["callSessionId"]  # fmt: skip
    await api.post(f"/sessions/{reminder}/connected")
    assert (await api.post(f"/sessions/{reminder}/end")).json()["reason"] == (
        "reminder calls are not summarised"
    )
    services = api.app.state.services
    services.settings = services.settings.model_copy(update={"min_session_seconds": 30.0})
    now = [1000.0]
    services.clock = lambda: now[0]
    short = await api.session()
    now[0] += 12.34
    assert (await api.post(f"/sessions/{short}/end")).json() == {
        "summarization": "skipped",
        "reason": "session lasted 12.3 s < CONFIDE_MIN_SESSION_SECONDS=30",
    }
    again = await api.post(f"/sessions/{short}/end")
    assert again.json() == {"summarization": "skipped", "reason": "session had already ended"}


async def test_a_scheduled_end_has_no_reason(api: Api) -> None:
    sid = await api.session()
    await say(api, sid, "I live in Portland.")
    assert (await api.post(f"/sessions/{sid}/end")).json() == {"summarization": "scheduled"}


async def test_session_status_follows_the_call_and_its_extraction(api: Api) -> None:
    services = api.app.state.services
    now = [1_700_000_000.0]
    services.clock = lambda: now[0]
    sid = await api.session(connected=False)
    status = (await api.client.get(f"/sessions/{sid}", headers=api.auth)).json()
    assert status["state"] == "created" and status["summarization"] is None
    assert status["connectedAt"] is None and status["durationSeconds"] is None
    await api.post(f"/sessions/{sid}/connected")
    await api.post(
        "/tools/store_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "memoryType": "fact", "key": "city", "value": "Portland, Oregon"},
    )  # fmt: skip
    await say(api, sid, "I have a dog named Biscuit.")
    assert (await api.client.get(f"/sessions/{sid}", headers=api.auth)).json()["state"] == (
        "connected"
    )
    now[0] += 45.0
    await api.post(f"/sessions/{sid}/end")
    await api.join()
    status = (await api.client.get(f"/sessions/{sid}", headers=api.auth)).json()
    assert status == {
        "callSessionId": sid,
        "lineId": "line-1",
        "state": "ended",
        "isReminderCall": False,
        "createdAt": "2023-11-14T22:13:20Z",
        "connectedAt": "2023-11-14T22:13:20Z",
        "endedAt": "2023-11-14T22:14:05Z",
        "durationSeconds": 45.0,
        "toolCalls": 1,
        "summarization": "done",
        "reason": None,
        "memoriesExtracted": 1,
    }
    assert "Biscuit" not in str(status) and "Portland" not in str(status)


async def test_session_status_of_a_skipped_session_gives_the_reason(api: Api) -> None:
    sid = await api.session(connected=False)
    await api.post(f"/sessions/{sid}/end")
    status = (await api.client.get(f"/sessions/{sid}", headers=api.auth)).json()
    assert status["state"] == "ended" and status["summarization"] == "skipped"
    assert status["reason"] == "session never connected (POST /sessions/{id}/connected)"


async def test_session_status_is_only_for_the_keys_account(api: Api) -> None:
    sid = await api.session()
    other = api.app.state.services.keys.create("acct-2")
    response = await api.client.get(
        f"/sessions/{sid}", headers={"Authorization": f"Bearer {other}"}
    )
    assert response.status_code == 404
    assert response.json() == {
        "success": False,
        "error": "Call session not found",
        "type": "NotFoundError",
    }
    assert (await api.client.get(f"/sessions/{sid}")).status_code == 401


async def test_ending_an_ended_session_keeps_its_outcome(api: Api) -> None:
    sid = await api.session()
    await say(api, sid, "I have a dog named Biscuit.")
    assert (await api.post(f"/sessions/{sid}/end")).json()["summarization"] == "scheduled"
    await api.join()
    again = await api.post(f"/sessions/{sid}/end")
    assert again.json() == {"summarization": "skipped", "reason": "session had already ended"}
    status = (await api.client.get(f"/sessions/{sid}", headers=api.auth)).json()
    assert status["summarization"] == "done" and status["memoriesExtracted"] == 1
