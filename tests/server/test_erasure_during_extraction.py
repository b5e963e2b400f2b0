"""A call's extraction still running when its user is erased stores nothing of the call.

The call ended before the erasure, so its extraction is in flight (waiting for the model)
when the user is erased; the memory it would write, sealed under a fresh key of the user's
next generation, must not appear after the erasure, nor that key, nor an event naming the
user.
"""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.config import Settings
from confide.conversation.extraction import LLMExtractor
from confide.engine import MemoryEngine
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.server import create_app
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply

EXTRACTED = json.dumps(
    [{"type": "fact", "key": "pet_dog_name", "value": "Biscuit", "confidence": 0.9}]
)


@pytest.mark.asyncio
async def test_an_extraction_in_flight_at_the_erasure_writes_nothing(
    engine: MemoryEngine, settings: Settings
) -> None:
    asked, answer = threading.Event(), threading.Event()

    def held(request: RecordedRequest) -> ScriptedReply:
        asked.set()
        answer.wait(60)  # until the user is erased
        return ScriptedReply(content=EXTRACTED)

    with ScriptedLLMServer(responder=held) as server:
        extractor = LLMExtractor(OpenAICompatibleLLM(base_url=server.base_url, model="scripted"))
        quick = settings.model_copy(update={"min_session_seconds": 0.0})
        app = create_app(quick, engine=engine, extractor=extractor)
        services = app.state.services
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as http:
            api = Api(app, http, services.keys.create(ACCOUNT))
            await api.end_call("My dog is called Biscuit.", line="line-9")
            # The extraction runs on this loop: wait for the model's request off it.
            assert await asyncio.to_thread(asked.wait, 60), "the extraction never asked"

            await asyncio.to_thread(engine.erase_user, account_id=ACCOUNT, user_id="line-9")
            answer.set()
            await services.tasks.join()

    assert list(engine.storage.iter_owner(ACCOUNT, "line-9")) == []
    assert engine.key_store.get(ACCOUNT, "line-9", "user") is None  # no key made for it
    assert [e for e in engine.op_events(account_id=ACCOUNT) if e.user_id == "line-9"] == []
