"""The multi-fact pass on every write path that brings conversation text, on both backends.

A long user turn reaches the pass whichever door brought it: a chat message over HTTP (queued,
run by the service's job worker), the SDK's ``add_message`` and ``add(messages)``, and the
end of a voice call (the buffer's turns). With a model configured the pass asks it (a
scripted server over HTTP); without one the offline extractor reads the turn. What it infers
about a sensitive key waits as a proposal.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from confide.client import Confide
from confide.config import Settings
from confide.conversation.proposals import ProposalStore
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.storage.jobs import SqlJobTables
from confide.storage.service.sessions import SqlServiceTables
from confide.testing.scripted_llm import ScriptedLLMServer
from confide.types import Memory, MemoryFilter
from confide.workers.multifact import MULTIFACT_PROMPT

ACCOUNT = "acct-mf"
USER = "ann"

TURN = (
    "Let me tell you a bit about my life these days. My dog Biscuit is a beagle and he keeps "
    "me busy. I walk him every morning along the river. My daughter Sarah lives in Boston "
    "and calls me on Sundays. I have also started learning Spanish at the community center, "
    "which I enjoy a lot."
)
SHORT = "My dog Biscuit is a beagle."


def _answer(*facts: tuple[str, str, str]) -> str:
    return json.dumps([{"type": t, "key": k, "value": v, "confidence": 0.9} for t, k, v in facts])


def _multifact(engine: MemoryEngine) -> dict[str, Memory]:
    """The user's memories the multi-fact pass wrote, by key."""
    memories = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id=USER), limit=100)
    return {m.key: m for m in memories if m.metadata.get("origin") == "multifact"}


def _asked_for_facts(server: ScriptedLLMServer) -> list[str]:
    """The turns the model was asked to list facts of (the multi-fact prompt's calls)."""
    return [
        str(r.messages[1]["content"])
        for r in server.requests
        if r.messages[0]["content"].startswith(MULTIFACT_PROMPT[:60])
    ]


def _with_model(settings: Settings, server: ScriptedLLMServer, **changes: Any) -> Settings:
    return settings.model_copy(
        update={"llm_base_url": server.base_url, "llm_model": "scripted", **changes}
    )


@pytest.mark.asyncio
async def test_a_long_chat_message_over_http_gets_the_offline_pass_without_a_model(
    engine: MemoryEngine, settings: Settings
) -> None:
    app = create_app(settings, engine=engine)
    services = app.state.services
    assert services.metered_llm is None
    token = services.keys.create(ACCOUNT)
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://confide.test"
    ) as http:
        for role, content in (("user", SHORT), ("assistant", TURN), ("user", TURN)):
            saved = await http.post(
                "/v1/conversations/c1/messages",
                json={"user_id": USER, "role": role, "content": content},
                headers=auth,
            )
            assert saved.status_code == 201, saved.text
        await services.tasks.join()
        jobs = SqlJobTables(engine.storage.database).jobs(kind="multifact")
        assert len(jobs) == 1  # the long user message only
        report = await asyncio.to_thread(services.run_jobs)
    assert report.done >= 1
    written = _multifact(engine)
    # At most three a turn; the offline rules read the user's own words.
    assert {"pet_dog_name", "daughter_name"} <= set(written) and len(written) == 3
    assert written["pet_dog_name"].value == "Biscuit"


def test_sdk_add_message_runs_the_pass_before_it_returns(engine: MemoryEngine) -> None:
    memory = Confide(engine, embedder=None)
    assert memory.llm is None
    base = {"account_id": ACCOUNT, "user_id": USER, "conversation_id": "c1"}
    memory.add_message(**base, role="assistant", content=TURN)
    memory.add_message(**base, role="user", content=SHORT)
    assert _multifact(engine) == {}  # an assistant's turn and a short one are not read
    memory.add_message(**base, role="user", content=TURN)
    written = _multifact(engine)
    assert {"pet_dog_name", "daughter_name"} <= set(written) and len(written) == 3


def test_sdk_add_of_a_conversation_asks_the_model_for_each_long_user_turn(
    engine: MemoryEngine, settings: Settings
) -> None:
    with ScriptedLLMServer() as server:
        server.enqueue(
            _answer(("fact", "daughter_name", "Sarah")),  # end-of-session extraction
            _answer(
                ("fact", "pet_dog_name", "The user's dog Biscuit is a beagle."),
                ("fact", "city", "The user lives in Boston."),
            ),  # the multi-fact pass over the long turn
        )
        memory = Confide(engine, embedder=None, settings=_with_model(settings, server))
        stored = memory.add(
            [
                {"role": "user", "content": TURN},
                {"role": "assistant", "content": "That sounds like a full life."},
                {"role": "user", "content": SHORT},
            ],
            user_id=USER,
            account_id=ACCOUNT,
        )
        asked = _asked_for_facts(server)
    assert asked == [TURN]  # the long user turn, once
    assert [m.key for m in stored] == ["daughter_name", "pet_dog_name"]
    assert set(_multifact(engine)) == {"pet_dog_name"}
    # Inferred, so the sensitive key waits for the user.
    proposals = ProposalStore(engine, SqlServiceTables(engine.storage.database))
    assert [p.key for p in proposals.pending(account_id=ACCOUNT, user_id=USER)] == ["city"]


@pytest.mark.asyncio
async def test_the_end_of_a_voice_call_runs_the_pass_over_its_long_user_turns(
    engine: MemoryEngine, settings: Settings
) -> None:
    with ScriptedLLMServer() as server:
        server.enqueue(
            _answer(("fact", "daughter_name", "Sarah")),
            _answer(
                ("fact", "pet_dog_name", "The user's dog Biscuit is a beagle."),
                ("fact", "city", "The user lives in Boston."),
            ),
        )
        app = create_app(_with_model(settings, server, min_session_seconds=0.0), engine=engine)
        services = app.state.services
        token = services.keys.create(ACCOUNT)
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://confide.test"
        ) as http:
            created = await http.post(
                "/sessions", json={"accountId": ACCOUNT, "lineId": USER}, headers=auth
            )
            sid = created.json()["callSessionId"]
            await http.post(f"/sessions/{sid}/connected", headers=auth)
            for speaker, text in (("user", TURN), ("assistant", TURN), ("user", SHORT)):
                said = await http.post(
                    f"/sessions/{sid}/turns", json={"speaker": speaker, "text": text}, headers=auth
                )
                assert said.status_code == 200, said.text
            ended = await http.post(f"/sessions/{sid}/end", headers=auth)
            assert ended.json() == {"summarization": "scheduled"}
            await services.tasks.join()
        asked = _asked_for_facts(server)
    assert asked == [TURN]
    assert set(_multifact(engine)) == {"pet_dog_name"}
    pending = services.proposals.pending(account_id=ACCOUNT, user_id=USER)
    assert [(p.key, p.proposed_value) for p in pending] == [("city", "The user lives in Boston.")]
