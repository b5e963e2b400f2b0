"""The app routes on both backends: ending a conversation, the context, the admin API
with its exact bodies, key scopes and 404s, and usage."""

from __future__ import annotations

import pytest
from tests.apps.conftest import ACCOUNT, ApiFactory, transcript

from engram.testing.scripted_llm import ScriptedLLMServer, ScriptedReply

pytestmark = pytest.mark.asyncio

PARAGRAPH = "The user prefers option 1 for the report. The deadline moved to Friday."


async def test_end_route_answers_at_once_and_writes_in_background(
    apps_api: ApiFactory, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(ScriptedReply(content=PARAGRAPH, delay=0.5))
    async with apps_api(llm_base_url=llm_server.base_url, llm_model="scripted") as api:
        response = await api.end("notes", "c1", {"messages": transcript(1), "reason": "done"})
        assert response.status_code == 202, response.text
        assert response.json() == {"status": "accepted", "appId": "notes", "conversationId": "c1"}
        assert api.apps.memories(ACCOUNT, "notes") == []  # the LLM is still answering
        await api.join()
        assert [m.value for m in api.apps.memories(ACCOUNT, "notes")] == [PARAGRAPH]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": []},
        {"messages": [{"role": "user"}]},
        {"messages": [{"role": "user", "content": "x"}], "extra": 1},
        {"messages": "hello"},
    ],
)
async def test_end_route_refuses_bad_bodies(apps_api: ApiFactory, body: object) -> None:
    async with apps_api() as api:
        response = await api.end("notes", "c1", body)
        assert response.status_code == 400, response.text
        bad_app = await api.end("bad app!", "c1", {"messages": transcript(1)})
        assert bad_app.status_code == 400, bad_app.text
        await api.join()
        assert api.apps.memories(ACCOUNT, "notes") == []
