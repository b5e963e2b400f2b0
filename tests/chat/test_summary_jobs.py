"""Rolling summaries through the job queue, over HTTP on both backends: a saved message
queues one ``chat_summary`` job per conversation while one is queued (its payload the
conversation's id, the account the job's), a worker run summarises (and, with a model, queues
the user's insights naming the conversation), and a model failure leaves the job to be
retried with the messages unsummarised."""

from __future__ import annotations

import uuid

import pytest
from tests.chat.conftest import ACCOUNT, ApiFactory

from confide.engine import MemoryEngine
from confide.storage.chat import SqlMessageTables
from confide.storage.jobs import JobRow, JobState, SqlJobTables
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply
from confide.workers.conversation_jobs import CHAT_SUMMARY

pytestmark = pytest.mark.asyncio


def _jobs(engine: MemoryEngine, conversation: str) -> list[JobRow]:
    return [
        j
        for j in SqlJobTables(engine.storage.database).jobs(kind=CHAT_SUMMARY)
        if j.payload == {"conversation_id": conversation}
    ]


async def test_a_burst_of_messages_queues_one_job_and_a_worker_run_summarises(
    chat_api: ApiFactory, engine: MemoryEngine
) -> None:
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    async with chat_api(summary_trigger=2, summary_batch=2) as api:
        for n in range(3):
            await api.say(conversation, "u1", f"Line {n} of the story.")
        [job] = _jobs(engine, conversation)
        assert (job.state, job.account_id) == (JobState.QUEUED, ACCOUNT)
        assert SqlMessageTables(engine.storage).summaries(ACCOUNT, conversation) == []
        await api.join()
        [done] = _jobs(engine, conversation)
        assert done.state == JobState.DONE
        [summary] = SqlMessageTables(engine.storage).summaries(ACCOUNT, conversation)
        assert (summary.range_start, summary.range_end) == (0, 2)
        # A message after the job ran queues the next check.
        await api.say(conversation, "u1", "Line 3 of the story.")
        states = sorted(j.state for j in _jobs(engine, conversation))
        assert states == [JobState.DONE, JobState.QUEUED]


async def test_a_summary_queues_the_users_insights_naming_the_conversation(
    chat_api: ApiFactory, engine: MemoryEngine
) -> None:
    summary = '{"summary": "Ann talked about her garden.", "facts": []}'
    with ScriptedLLMServer([summary]) as server:
        model = {"llm_base_url": server.base_url, "llm_model": "scripted"}
        async with chat_api(summary_trigger=2, summary_batch=2, **model) as api:
            for n in range(3):
                await api.say("c-insights", "u1", f"Line {n} of the story.")
            assert SqlJobTables(engine.storage.database).jobs(kind="insights") == []
            await api.join()
            [job] = SqlJobTables(engine.storage.database).jobs(kind="insights")
            assert (job.account_id, job.payload) == (
                ACCOUNT,
                {"user_id": "u1", "conversation_id": "c-insights"},
            )


async def test_a_model_failure_leaves_the_job_to_retry_and_the_messages_unsummarised(
    chat_api: ApiFactory, engine: MemoryEngine
) -> None:
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    busy = ScriptedReply(status=503, body=b'{"error": "busy"}')
    with ScriptedLLMServer(default=busy) as server:
        settings = {
            "summary_trigger": 2,
            "summary_batch": 2,
            "llm_base_url": server.base_url,
            "llm_model": "scripted",
            "worker_backoff_seconds": 3600.0,
        }
        async with chat_api(**settings) as api:
            for n in range(3):
                await api.say(conversation, "u1", f"Line {n} of the story.")
            await api.join()
            assert server.requests  # the model was asked, and failed
            [job] = _jobs(engine, conversation)
            assert (job.state, job.attempts) == (JobState.QUEUED, 1)
            assert job.last_error == "ProviderError"
            assert job.run_at >= job.updated_at + 3600.0  # backed off, not run again at once
            assert len(SqlMessageTables(engine.storage).unsummarised(ACCOUNT, conversation)) == 3
            await api.say(conversation, "u1", "Line 3 of the story.")
            assert len(_jobs(engine, conversation)) == 1  # still queued: nothing added
