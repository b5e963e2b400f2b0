"""Operational events of the service's paths, read back with every field, on both backends:
a call's extraction writes, live tool writes folded into a duplicate, and ``memory_query``
over HTTP, each with the similarity that decided it as ``sim``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from tests.server.conftest import ACCOUNT, Api

from confide.client import Confide
from confide.config import Settings
from confide.conversation.query_handler import RetrievalQueryHandler
from confide.embedders import Embedder, build_embedder
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.types import OpEvent

pytestmark = pytest.mark.asyncio


def _events(api: Api, *, node: str | None = None, op: str | None = None) -> list[OpEvent]:
    engine: MemoryEngine = api.app.state.services.engine
    return engine.op_events(account_id=ACCOUNT, node=node, op=op)


async def _tool_store(api: Api, sid: str, key: str, value: str) -> dict[str, object]:
    response = await api.post(
        "/tools/store_memory",
        {"callSessionId": sid, "lineId": "line-1", "accountId": ACCOUNT,
         "memoryType": "preference", "key": key, "value": value},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    return answer


async def test_a_calls_extraction_writes_are_events_with_the_duplicates_similarity(
    api: Api,
) -> None:
    sid = await api.session()
    kept = await _tool_store(api, sid, "like_gardening", "gardening")
    said = {"speaker": "user", "text": "I have a dog named Biscuit. I love gardening."}
    await api.post(f"/sessions/{sid}/turns", said)
    assert (await api.post(f"/sessions/{sid}/end")).json() == {"summarization": "scheduled"}
    await api.join()
    episodic = _events(api, node="episodic")
    listing = await api.client.get("/v1/memories", params={"user_id": "line-1"}, headers=api.auth)
    created = {m["key"]: m for m in listing.json()["memories"]}["pet_dog_name"]
    assert [(e.op, e.status, e.memory_id, e.user_id) for e in episodic] == [
        ("create", "ok", created["id"], "line-1"),
        ("merge", "duplicate", kept["memoryId"], "line-1"),
        ("extract", "ok", None, "line-1"),
    ]
    create, merge, extract = episodic
    assert create.sim is None and extract.sim is None
    # "likes: gardening" said again: the normalised texts decided it.
    assert merge.sim is not None and 0.92 <= merge.sim <= 1.0


async def test_a_call_that_extracts_nothing_is_an_empty_extraction(api: Api) -> None:
    sid = await api.session()
    await api.post(f"/sessions/{sid}/turns", {"speaker": "user", "text": "Hello there."})
    await api.post(f"/sessions/{sid}/end")
    await api.join()
    assert [(e.op, e.status) for e in _events(api, node="episodic")] == [("extract", "empty")]


async def test_a_live_write_folded_into_its_duplicate_records_the_similarity(api: Api) -> None:
    sid = await api.session()
    first = await _tool_store(api, sid, "like_gardening", "gardening")
    again = await _tool_store(api, sid, "likes_gardening", "Gardening!")
    assert again["action"] == "duplicate" and again["memoryId"] == first["memoryId"]
    same = await _tool_store(api, sid, "like_gardening", "gardening")
    assert same["action"] == "unchanged"
    merges = _events(api, node="hotpath", op="merge")
    assert [(e.status, e.memory_id, e.sim) for e in merges] == [
        ("duplicate", first["memoryId"], 1.0),
        ("unchanged", first["memoryId"], 1.0),
    ]
    [create] = _events(api, node="hotpath", op="create")
    assert (create.memory_id, create.sim) == (first["memoryId"], None)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real local MiniLM embedder, loaded once for the module."""
    embedder = build_embedder("local:all-MiniLM-L6-v2", home=tmp_path_factory.mktemp("home"))
    assert embedder is not None
    return embedder


@pytest_asyncio.fixture
async def retrieval(
    engine: MemoryEngine, settings: Settings, minilm: Embedder, tmp_path: Path
) -> AsyncIterator[Api]:
    """The service with retrieval wired as ``Confide.open`` wires it, over the real model."""
    confide = Confide(engine, embedder=minilm, settings=settings)
    app = create_app(
        settings,
        engine=engine,
        embedder=minilm,
        query=RetrievalQueryHandler(confide.memory_query),
    )
    token = app.state.services.keys.create(ACCOUNT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        yield Api(app, client, token)
        await app.state.services.tasks.join()
    confide.access.close()


@pytest.mark.slow
async def test_memory_query_over_http_is_a_search_event_with_its_best_similarity(
    retrieval: Api,
) -> None:
    api = retrieval
    for key, value in (
        ("dog_name", "Ann's dog is a beagle called Biscuit."),
        ("tea", "Ann likes her tea with lemon."),
    ):
        stored = await api.post("/v1/memories", {"user_id": "ann", "key": key, "value": value})
        assert stored.status_code == 201, stored.text
    ask = {"user_id": "ann", "query": "what is her dog called?", "top_k": 2, "return": "full"}
    answer = await api.post("/v1/memory_query", ask)
    assert answer.status_code == 200, answer.text
    best = max(r["similarity"] for r in answer.json()["results"])
    nobody = await api.post("/v1/memory_query", {**ask, "user_id": "nobody"})
    assert nobody.json()["results"] == []
    searches = _events(api, node="hotpath", op="search")
    assert [(e.user_id, e.status) for e in searches] == [("ann", "ok"), ("nobody", "empty")]
    assert searches[0].sim == pytest.approx(best, abs=1e-4)
    assert searches[1].sim is None
