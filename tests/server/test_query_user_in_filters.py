"""``memory_query`` names its user at the top level (``user_id``) or, as the specification
writes it, in ``filters.user_id``: the REST route, the tool route and the SDK take either or
both alike; two different users are a 400 naming both fields (both backends)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from tests.apps.conftest import transcript
from tests.server.conftest import ACCOUNT, Api

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.server import create_app

pytestmark = pytest.mark.asyncio

LINE = "line-1"


@pytest_asyncio.fixture
async def api(engine: MemoryEngine, settings: Settings) -> AsyncIterator[Api]:
    """The service over the parametrised engine, retrieval lexical only (no embedder)."""
    app = create_app(settings.model_copy(update={"embedder": "none"}), engine=engine)
    token = app.state.services.keys.create(ACCOUNT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        yield Api(app, client, token)
        await app.state.services.tasks.join()
    app.state.services.close()


async def _seed(api: Api) -> dict[str, str]:
    ids = {}
    for user, value in ((LINE, "Ann's dog is called Biscuit."), ("bob", "Bob's dog is Rex.")):
        body = {"user_id": user, "key": "dog_name", "value": value}
        response = await api.post("/v1/memories", body)
        assert response.status_code == 201, response.text
        ids[user] = response.json()["id"]
    return ids


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["results"]]


async def test_the_rest_route_takes_the_user_from_the_filters(api: Api) -> None:
    ids = await _seed(api)
    ask: dict[str, Any] = {"query": "dog", "top_k": 5}
    by_filter = await api.post("/v1/memory_query", {**ask, "filters": {"user_id": LINE}})
    assert _ids(by_filter) == [ids[LINE]]
    both = {**ask, "user_id": "bob", "filters": {"user_id": "bob"}}
    assert _ids(await api.post("/v1/memory_query", both)) == [ids["bob"]]
    # The other filters still apply beside it.
    typed = {**ask, "filters": {"user_id": LINE, "type": "preference"}}
    assert _ids(await api.post("/v1/memory_query", typed)) == []


async def test_two_different_users_are_a_400_naming_both_fields(api: Api) -> None:
    await _seed(api)
    body = {"query": "dog", "user_id": LINE, "filters": {"user_id": "bob"}}
    response = await api.post("/v1/memory_query", body)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["type"] == "ValidationError"
    assert answer["error"] == "user_id and filters.user_id name different users"
    assert answer["fields"] == ["user_id", "filters.user_id"]
    assert "bob" not in response.text
    neither = await api.post("/v1/memory_query", {"query": "dog"})
    assert neither.status_code == 400 and neither.json()["error"] == "user_id is required"
    bad = await api.post("/v1/memory_query", {"query": "dog", "filters": {"user_id": 7}})
    assert bad.status_code == 400 and bad.json()["fields"] == ["filters.user_id"]


async def test_the_users_rules_hold_for_a_user_named_in_the_filters(api: Api) -> None:
    # An app's memories are an admin key's, however the query names their owner.
    Confide(api.app.state.services.engine, embedder=None).end_app_conversation(
        "notes", "c0", transcript(0), account_id=ACCOUNT
    )
    body = {"query": "report", "filters": {"user_id": "app:notes"}}
    response = await api.post("/v1/memory_query", body)
    assert response.status_code == 403, response.text


async def test_the_tool_route_takes_the_calls_user_in_the_filters(api: Api) -> None:
    ids = await _seed(api)
    sid = await api.session(LINE)
    call = {"callSessionId": sid, "lineId": LINE, "accountId": ACCOUNT, "query": "dog"}
    same = await api.post("/tools/memory_query", {**call, "filters": {"user_id": LINE}})
    assert _ids(same) == [ids[LINE]]
    other = await api.post("/tools/memory_query", {**call, "filters": {"userId": "bob"}})
    assert other.status_code == 400, other.text
    assert other.json()["fields"] == ["user_id", "filters.userId"]


async def test_the_sdk_takes_the_user_from_the_filters(api: Api) -> None:
    ids = await _seed(api)
    sdk = api.app.state.services.sdk
    ask = {"agent": "default", "account_id": ACCOUNT, "query": "dog", "top_k": 5}
    answer = sdk.query({**ask, "filters": {"user_id": LINE}})
    assert [r["id"] for r in answer.results] == [ids[LINE]]
    with pytest.raises(ValidationError, match=r"user_id and filters\.user_id") as refused:
        sdk.query({**ask, "user_id": LINE, "filters": {"user_id": "bob"}})
    assert refused.value.fields == ("user_id", "filters.user_id")
