"""Consent given in the call: the user's own words apply at once, inferences still wait.

A voice companion's ``store_memory`` of a sensitive key (or an unsure one) during the call is
made on what the user just said: it is stored, audited as consented in the conversation and
read back by ``memory_query`` in the same call; what extraction infers from the transcript at
the end of the call still waits for the user as a proposal.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from tests.server.conftest import ACCOUNT, Api

from confide.client import Confide
from confide.config import Settings
from confide.conversation.consent import CONSENTED_IN_CONVERSATION
from confide.conversation.query_handler import RetrievalQueryHandler
from confide.conversation.realtime import RealtimeAdapter
from confide.embedders import configured_embedder
from confide.engine import MemoryEngine
from confide.server import create_app

pytestmark = pytest.mark.asyncio

LINE = "line-1"


@pytest_asyncio.fixture
async def api(engine: MemoryEngine, settings: Settings) -> AsyncIterator[Api]:
    """The service over the parametrised engine, memory_query ranked with the real local
    embedder (as ``Confide.open`` wires it), extraction offline."""
    embedder = configured_embedder(settings)
    confide = Confide(engine, embedder=embedder, settings=settings)
    app = create_app(
        settings.model_copy(update={"min_session_seconds": 0.0}),
        engine=engine,
        embedder=embedder,
        query=RetrievalQueryHandler(confide.memory_query),
    )
    token = app.state.services.keys.create(ACCOUNT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        yield Api(app, client, token)
        await app.state.services.tasks.join()


def transcript(text: str) -> dict[str, Any]:
    return {"type": "conversation.item.input_audio_transcription.completed", "transcript": text}


async def call_tool(
    adapter: RealtimeAdapter, call_id: str, name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """Send one function call through the adapter; the tool's answer."""
    out: list[dict[str, Any]] = []
    for event in (
        {
            "type": "response.output_item.added",
            "item": {"type": "function_call", "call_id": call_id, "name": name},
        },
        {
            "type": "response.function_call_arguments.done",
            "call_id": call_id,
            "arguments": json.dumps(arguments),
        },
    ):
        out += await adapter.handle(event)
    (item,) = [e for e in out if e["type"] == "conversation.item.create"]
    answer: dict[str, Any] = json.loads(item["item"]["output"])
    return answer


async def test_a_name_said_in_the_call_is_stored_and_read_back_in_the_same_call(
    api: Api,
) -> None:
    services = api.app.state.services
    sid = await api.session()
    adapter = services.adapter(sid)
    await adapter.session_update()

    await adapter.handle(transcript("Please call me Annie from now on. I live in Porto."))
    stored = await call_tool(
        adapter,
        "c1",
        "store_memory",
        {"memory_type": "preference", "key": "preferred_name", "value": "Annie"},
    )
    assert stored["success"] is True and stored["action"] == "created", stored
    # An unsure write is the user's word too: applied, not held.
    unsure = await call_tool(
        adapter,
        "c2",
        "store_memory",
        {"memory_type": "fact", "key": "car", "value": "a red Volvo", "confidence": 0.4},
    )
    assert unsure["action"] == "created", unsure

    found = await call_tool(adapter, "c3", "memory_query", {"query": "what is her name?"})
    assert any("Annie" in r["text"] for r in found["results"]), found

    audit = await api.client.get(f"/v1/memories/{stored['memoryId']}/history", headers=api.auth)
    assert [(h["event"], h["actor"]) for h in audit.json()["history"]] == [
        ("ADD", CONSENTED_IN_CONVERSATION)
    ]
    assert services.proposals.pending(account_id=ACCOUNT, user_id=LINE) == []

    # The call ends; the offline extractor infers the city from the transcript: a sensitive
    # key nobody asked to store waits for the user.
    ended = await api.post(f"/sessions/{sid}/end")
    assert ended.json() == {"summarization": "scheduled"}
    await api.join()
    listing = await api.client.get("/v1/memories", params={"user_id": LINE}, headers=api.auth)
    values = {m["key"]: m["value"] for m in listing.json()["memories"]}
    assert values["preferred_name"] == "Annie" and values["car"] == "a red Volvo"
    assert "city" not in values
    pending = services.proposals.pending(account_id=ACCOUNT, user_id=LINE)
    assert [(p.key, p.proposed_value) for p in pending] == [("city", "Porto")]
    ops = services.engine.op_counts(by="op", account_id=ACCOUNT)
    assert "hold" not in ops


async def test_a_live_write_settles_what_extraction_proposed(api: Api) -> None:
    services = api.app.state.services
    first = await api.session()
    await api.post(f"/sessions/{first}/turns", {"speaker": "user", "text": "I live in Denver."})
    await api.post(f"/sessions/{first}/end")
    await api.join()
    (proposal,) = services.proposals.pending(account_id=ACCOUNT, user_id=LINE)
    assert (proposal.key, proposal.proposed_value) == ("city", "Denver")

    # In the next call the user says it themselves: the agent's write applies and confirms it.
    second = await api.session()
    adapter = services.adapter(second)
    await adapter.handle(transcript("I moved to Denver last spring."))
    answer = await call_tool(
        adapter, "c1", "store_memory", {"memory_type": "fact", "key": "City", "value": "Denver"}
    )
    assert answer["action"] == "created"
    assert services.proposals.pending(account_id=ACCOUNT, user_id=LINE) == []
    memory = services.engine.get(answer["memoryId"], account_id=ACCOUNT)
    assert (memory.key, memory.value) == ("city", "Denver")  # the canonical spelling
    events = services.engine.history(memory.id, account_id=ACCOUNT)
    decisions = [e.meta.get("decision") for e in events if e.event.value == "PROPOSAL"]
    assert decisions == ["confirmed"]
    assert services.engine.op_counts(by="op", account_id=ACCOUNT).get("proposal_confirmed") == 1
