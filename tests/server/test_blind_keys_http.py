"""Through the service: keys stay blinded in every table, and a tampered row is left out."""

from __future__ import annotations

import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.conversation.extraction import ProposedChange
from confide.storage.base import Capability
from confide.testing.conformance.blind_keys import assert_no_clear_keys, database_bytes, raw_rows
from confide.types import MemoryType

pytestmark = pytest.mark.asyncio

ALL_TABLES = ("memories", "history", "changes", "session_events", "proposals", "ops_events")
CLEAR = ("dislikes_ex_husband_robert", "likes_cocaine", "prefers_methadone", "pain_lower_back")


async def listing(api: Api, user: str = "line-1") -> dict[str, str]:
    response = await api.client.get("/v1/memories", params={"user_id": user}, headers=api.auth)
    assert response.status_code == 200, response.text
    return {m["key"]: m["value"] for m in response.json()["memories"]}


@pytest.mark.requires(Capability.DATA_FILES)
async def test_api_tool_and_extractor_keys_never_reach_storage_in_clear(api: Api) -> None:
    created = await api.post(
        "/v1/memories",
        {"user_id": "line-1", "key": "dislikes_ex_husband_robert", "value": "he lied"},
    )
    assert created.status_code == 201, created.text
    assert created.json()["key"] == "dislikes_ex_husband_robert"
    sid = await api.session()
    tool = await api.post(
        "/tools/store_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "memoryType": "preference", "key": "likes_cocaine", "value": "on weekends"},
    )  # fmt: skip
    assert tool.status_code == 200, tool.text
    for text in ("My lower back has been hurting.", "I prefer methadone over morphine."):
        said = await api.post(f"/sessions/{sid}/turns", {"speaker": "user", "text": text})
        assert said.status_code == 200, said.text
    await api.post(f"/sessions/{sid}/end")
    await api.join()
    services = api.app.state.services
    proposal_id = services.proposals.file(
        ProposedChange(
            account_id=ACCOUNT, user_id="line-1", key="dislikes_ex_husband_robert",
            current_value="he lied", proposed_value="he lied a lot",
            type=MemoryType.PREFERENCE, confidence=0.9, session_id=sid,
        )
    )  # fmt: skip

    # The readable keys come back through the API; the extractor used its vocabulary.
    assert await listing(api) == {
        "dislikes_ex_husband_robert": "he lied",
        "likes_cocaine": "on weekends",
        "pain": "The user's lower back has been hurting",
        "prefers": "methadone over morphine",
    }
    shown = await api.client.get("/v1/proposals", params={"user_id": "line-1"}, headers=api.auth)
    assert [(p["id"], p["key"]) for p in shown.json()["proposals"]] == [(proposal_id, CLEAR[0])]

    storage = services.engine.storage
    assert_no_clear_keys(raw_rows(storage, ALL_TABLES), CLEAR)
    assert "methadone" not in raw_rows(storage, ALL_TABLES)
    dump = database_bytes(storage)
    assert_no_clear_keys(dump, CLEAR)
    assert b"methadone" not in dump


async def test_a_tampered_row_is_left_out_and_counted(api: Api) -> None:
    ids = []
    for key in ("alpha", "beta", "gamma"):
        response = await api.post(
            "/v1/memories", {"user_id": "line-1", "key": key, "value": f"{key} value"}
        )
        ids.append(response.json()["id"])
    storage = api.app.state.services.engine.storage
    with storage.transaction() as tx:
        tx.run("UPDATE memories SET visibility = 'shared' WHERE id = ?", [ids[1]])
    assert set(await listing(api)) == {"alpha", "gamma"}
    # Reading the tampered row itself is a JSON error, never a stack trace.
    one = await api.client.get(f"/v1/memories/{ids[1]}", headers=api.auth)
    assert one.status_code == 409
    assert one.json()["success"] is False and "Traceback" not in one.text
    metrics = (await api.client.get("/metrics", headers=api.auth)).text
    assert "confide_integrity_failures_total 2" in metrics
