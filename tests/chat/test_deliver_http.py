"""``POST /v1/conversations/{id}/deliver``: a turn's delivery over HTTP, in both modes, as the
SDK's ``deliver`` gives it, under the key's agents (both backends)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.chat.conftest import ApiFactory

from confide.engine import MemoryEngine
from confide.testing.builders import add

ACCOUNT = "acct-1"
PROFILES = """
categories:
  system:
    fact: {context: rag}
    preference: {context: all}
allowlists:
  concierge: ["*"]
  voice: ["*"]
  planner: ["preference"]
profiles:
  concierge:
    identity: You are Juno, the concierge of Maple House.
    channel_guidelines: {web: "Use short paragraphs.", sms: "At most 300 characters."}
  voice:
    identity: You are Juno on the phone.
    delivery: instructions
"""


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(PROFILES, encoding="utf-8")
    return path


@pytest.mark.asyncio
async def test_deliver_over_http_in_both_modes(
    chat_api: ApiFactory, engine: MemoryEngine, profiles: Path
) -> None:
    async with chat_api(categories_file=profiles) as api:
        token = api.app.state.services.keys.create(ACCOUNT, agents=["concierge", "voice"])
        api.token = token
        await api.say("c1", "user-1", "Tell me about Theo.", channel="web")
        await api.say("c1", "user-1", "Texting now.", channel="sms")
        add(engine, key="grandson", value="Her grandson Theo plays the cello", importance=4)
        body = {"user_id": "user-1", "input": "Theo cello", "channel": "web"}
        response = await api.post("/v1/conversations/c1/deliver", body)
        assert response.status_code == 200, response.text
        turn = response.json()
        assert set(turn) == {"mode", "systemPrompt", "contextMessages", "messages"}
        assert turn["mode"] == "history"  # the key's first agent, the concierge
        assert turn["systemPrompt"] == (
            "# Identity\nYou are Juno, the concierge of Maple House.\n\n"
            "## Channel guidelines\n- Use short paragraphs."
        )
        assert [c["content"] for c in turn["contextMessages"]] == [
            "Relevant context from past interactions:\n- Her grandson Theo plays the cello"
        ]
        assert [m["content"] for m in turn["messages"]] == ["Tell me about Theo."]  # web only
        assert set(turn["messages"][0]) == {"role", "content", "timestamp"}

        voice = await api.post("/v1/conversations/c1/deliver", {**body, "agent": "voice"})
        assert voice.status_code == 200, voice.text
        spoken = voice.json()
        assert spoken["mode"] == "instructions"
        assert spoken["contextMessages"] == [] and spoken["messages"] == []
        assert spoken["systemPrompt"].startswith("# Identity\nYou are Juno on the phone.")
        assert "Her grandson Theo plays the cello" in spoken["systemPrompt"]

        refused = await api.post("/v1/conversations/c1/deliver", {**body, "agent": "planner"})
        assert refused.status_code == 403  # an agent the key is not bound to
        other = await api.post("/v1/conversations/c1/deliver", {**body, "user_id": "user-2"})
        assert other.status_code == 404  # another user's conversation
        bad = await api.post("/v1/conversations/c1/deliver", {"user_id": "user-1"})
        assert bad.status_code == 400


@pytest.mark.asyncio
async def test_an_agent_without_a_profile_is_refused(chat_api: ApiFactory, profiles: Path) -> None:
    async with chat_api(categories_file=profiles) as api:
        api.token = api.app.state.services.keys.create(ACCOUNT, agents=["planner"])
        await api.say("c1", "user-1", "Hello.")
        response = await api.post(
            "/v1/conversations/c1/deliver", {"user_id": "user-1", "input": "hi"}
        )
        assert response.status_code == 400
        assert "no profile" in response.json()["error"]


@pytest.mark.asyncio
async def test_openapi_documents_the_history_routes(chat_api: ApiFactory) -> None:
    async with chat_api() as api:
        spec = api.app.openapi()
        for route in ("retrieve", "memory_context", "deliver"):
            operation = spec["paths"][f"/v1/conversations/{{conversation_id}}/{route}"]["post"]
            assert operation["summary"] and operation["description"], route
            assert "200" in operation["responses"], route
        deliver = spec["components"]["schemas"]["DeliverBody"]
        assert deliver["required"] == ["user_id", "input"]
        assert deliver["examples"][0]["agent"] == "concierge"
        out = spec["components"]["schemas"]["DeliveryOut"]
        assert set(out["properties"]) == {"mode", "systemPrompt", "contextMessages", "messages"}
        tiers = spec["components"]["schemas"]["MemoryContextOut"]
        assert set(tiers["properties"]) == {"shortTerm", "longTerm", "semantic"}
