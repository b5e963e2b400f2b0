"""The delta header in memory_query answers and realtime instructions, and ``GET /v1/ops``,
in process, on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from tests.server.conftest import ACCOUNT, Api

from confide.config import Settings
from confide.conversation.query_handler import RetrievalQueryHandler
from confide.embedders.base import Vector
from confide.engine import MemoryEngine
from confide.errors import ProviderError
from confide.retrieval.categories import load_categories
from confide.retrieval.memory_query import MemoryQueryService
from confide.server import create_app
from confide.server.services import Services
from confide.testing.embedders import HashingEmbedder

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def api(engine: MemoryEngine, settings: Settings) -> AsyncIterator[Api]:
    """The service over the parametrised engine, with memory_query wired as Confide wires it
    (lexical retrieval only: these tests are about the header, not ranking)."""
    service = MemoryQueryService(
        engine, load_categories(), embedder=None, deltas=engine, ops=engine
    )
    app = create_app(settings, engine=engine, query=RetrievalQueryHandler(service))
    token = app.state.services.keys.create(ACCOUNT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        yield Api(app, client, token)
        await app.state.services.tasks.join()


def tool(session_id: str, **fields: object) -> dict[str, object]:
    return {"callSessionId": session_id, "lineId": "line-1", "accountId": ACCOUNT, **fields}


async def _query(api: Api, user: str = "line-1", **extra: object) -> dict[str, object]:
    response = await api.post("/v1/memory_query", {"user_id": user, "query": "name", **extra})
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    return answer


async def test_memory_query_starts_with_each_change_once(api: Api) -> None:
    sid = await api.session()
    stored = await api.post(
        "/tools/store_memory", tool(sid, memoryType="fact", key="favorite_color", value="green")
    )
    assert stored.status_code == 200, stored.text
    first = await _query(api)
    assert next(iter(first)) == "header"  # the first part of the answer
    assert first["header"] == (
        "Memory updates since rev 0:\n- +created: [Fact] Favorite color is green (imp=2)"
    )
    assert (await _query(api))["header"] == ""  # shown once
    await api.post("/tools/update_memory", tool(sid, existingKey="favorite_color", newValue="blue"))
    assert (await _query(api))["header"] == (
        "Memory updates since rev 1:\n- ↑updated: [Fact] Favorite color is blue (imp=2)"
    )
    # Another user of the account never sees line-1's memories in their header.
    assert (await _query(api, user="line-2"))["header"] == ""


async def test_the_header_respects_the_token_budget(api: Api) -> None:
    sid = await api.session()
    for key, value in (("city", "Portland"), ("pet_name", "Rex"), ("hobby", "chess")):
        await api.post("/tools/store_memory", tool(sid, memoryType="fact", key=key, value=value))
    # The header may take half the budget: its title and the newest of three bullets fit.
    answer = await _query(api, budget_tokens=60)
    assert answer["header"] == (
        "Memory updates since rev 0:\n- +created: [Fact] Hobby is chess (imp=2)"
    )
    assert isinstance(answer["tokens"], int) and answer["tokens"] <= 60


async def test_realtime_instructions_start_with_the_header_once(api: Api) -> None:
    services: Services = api.app.state.services
    sid = await api.session()
    await api.post(
        "/tools/store_memory", tool(sid, memoryType="fact", key="home_town", value="Lima")
    )
    services.engine.store(
        {
            "account_id": ACCOUNT,
            "user_id": "line-1",
            "key": "tea_steps",
            "value": "1. Boil the water. 2. Steep the tea for four minutes.",
            "type": "procedural",
        }
    )
    session = services.buffer_session(services.session_of(sid, account_id=ACCOUNT))
    adapter = services.adapter(session.session_id, reader="voice")
    first = str((await adapter.session_update())["session"]["instructions"])
    assert first.startswith("Memory updates since rev 0:\n")
    assert "- +created: [Fact] Home town is Lima (imp=2)" in first.split("\n\n")[0]
    # Procedural steps reach an agent only when it asks for them.
    assert "Steep the tea" not in first.split("\n\n", 1)[1]
    again = str((await adapter.session_update())["session"]["instructions"])
    assert not again.startswith("Memory updates") and "home_town: Lima" in again


async def test_ops_counts_the_accounts_events_by_op_and_node(api: Api) -> None:
    sid = await api.session()
    turn = {"speaker": "user", "text": "Where did I leave my keys?"}
    assert (await api.post(f"/sessions/{sid}/turns", turn)).status_code == 200
    oslo = tool(sid, memoryType="fact", key="home_town", value="Oslo")
    await api.post("/tools/store_memory", oslo)
    await api.post("/tools/store_memory", oslo)
    await api.post("/tools/update_memory", tool(sid, existingKey="home_town", newValue="Bergen"))
    await _query(api)
    response = await api.client.get("/v1/ops", params={"since": "1d"}, headers=api.auth)
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["byOp"] == {"classify": 1, "create": 1, "merge": 1, "search": 1, "update": 1}
    assert report["byNode"] == {"hotpath": 5} and report["total"] == 5
    # Account-scoped: another account's key sees none of it.
    other = api.app.state.services.keys.create("acct-other", scope="read")
    elsewhere = await api.client.get(
        "/v1/ops", params={"since": "30m"}, headers={"Authorization": f"Bearer {other}"}
    )
    assert elsewhere.status_code == 200 and elsewhere.json()["total"] == 0
    bad = await api.client.get("/v1/ops", params={"since": "yesterday"}, headers=api.auth)
    assert bad.status_code == 400 and "30m" in bad.text


async def test_a_sensitive_tool_write_applies_and_is_counted_as_consented(api: Api) -> None:
    sid = await api.session()
    written = await api.post(
        "/tools/store_memory", tool(sid, memoryType="fact", key="city", value="Lima")
    )
    assert written.status_code == 200, written.text
    answer = written.json()
    assert answer["action"] == "created" and answer["memoryId"]
    assert "proposalId" not in answer
    pending = await api.client.get("/v1/proposals", params={"user_id": "line-1"}, headers=api.auth)
    assert pending.json()["proposals"] == []
    ops = await api.client.get("/v1/ops", params={"since": "30m"}, headers=api.auth)
    assert ops.json()["byOp"].get("create") == 1 and "hold" not in ops.json()["byOp"]
    statuses = api.app.state.services.engine.op_counts(by="status", account_id=ACCOUNT)
    assert statuses.get("consented") == 1


class _FailsFirstQuestion(HashingEmbedder):
    """Raises on the first question it embeds: the answer fails after the header check."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def embed_one(self, text: str) -> Vector:
        if not self.failed:
            self.failed = True
            raise ProviderError("the embedder is down")
        return super().embed_one(text)


async def test_an_answer_that_fails_leaves_its_header_for_the_next(engine: MemoryEngine) -> None:
    service = MemoryQueryService(
        engine, load_categories(), embedder=_FailsFirstQuestion(), deltas=engine
    )
    engine.store({"account_id": ACCOUNT, "user_id": "line-1", "key": "city", "value": "Lima"})
    request = {"agent": "default", "account_id": ACCOUNT, "user_id": "line-1", "query": "city"}
    with pytest.raises(ProviderError):
        service.query(request)
    # The change was not delivered with the failed answer, so the next one carries it.
    assert service.query(request).header.startswith("Memory updates since rev 0:\n- +created")
    assert service.query(request).header == ""
