"""The insights an ended voice call queues read what the call left: its turns lived only in
the call's buffer, so the job names the call by id and the worker gives the model (a
scripted server over HTTP) the memories written from that call, and only those."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.storage.jobs import SqlJobTables
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.types import NewMemory, Source
from confide.workers.insights import INSIGHT_PROMPT
from confide.workers.memory_jobs import MemoryJobs
from confide.workers.worker import Worker

EXTRACTED = json.dumps(
    [{"type": "fact", "key": "pet_dog_name", "value": "Biscuit", "confidence": 0.9}]
)
INSIGHT = json.dumps({"insights": [{"summary": "The user is attached to their dog.", "tags": []}]})


@pytest.mark.asyncio
async def test_an_ended_calls_insights_read_the_memories_written_from_that_call(
    engine: MemoryEngine, settings: Settings
) -> None:
    prompts: list[str] = []

    def reply(request: RecordedRequest) -> ScriptedReply:
        if request.messages[0]["content"] == INSIGHT_PROMPT:
            prompts.append(str(request.messages[1]["content"]))
            return ScriptedReply(content=INSIGHT)
        return ScriptedReply(content=EXTRACTED)

    with ScriptedLLMServer(responder=reply) as server:
        quick = settings.model_copy(
            update={
                "min_session_seconds": 0.0,
                "llm_base_url": server.base_url,
                "llm_model": "scripted",
            }
        )
        app = create_app(quick, engine=engine)
        services = app.state.services
        # Another call's memory of the same user: not part of this call's snippet.
        engine.store(
            NewMemory(
                account_id=ACCOUNT,
                user_id="line-9",
                key="drink",
                value="The user drinks tea with lemon",
                source=Source.EXTRACTION,
                metadata={"session_id": "an-earlier-call"},
            )
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as http:
            api = Api(app, http, services.keys.create(ACCOUNT))
            sid = await api.end_call("My dog is called Biscuit.", line="line-9")
            await services.tasks.join()

        [job] = SqlJobTables(engine.storage.database).jobs(kind="insights")
        assert job.payload == {"user_id": "line-9", "session_id": sid}  # ids only
        worker = Worker(engine, quick)
        MemoryJobs(llm=services.metered_llm).register(worker)
        assert worker.run_once(kinds=["insights"], schedules=False).done == 1

    [prompt] = prompts
    context = prompt.split("Recent conversation:\n", 1)[1]
    assert context == "call: Biscuit"
    assert "tea with lemon" not in context
