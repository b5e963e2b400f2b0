"""The insights a chat's rolling summary queues read a snippet of that conversation: the job
names it by id, the worker opens its latest messages from the store, and the model (a
scripted server over HTTP) receives them in the prompt; nothing logs them (both backends)."""

from __future__ import annotations

import json

import pytest

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.storage.chat import SqlMessageTables
from confide.storage.jobs import SqlJobTables
from confide.testing.scripted_llm import ScriptedLLMServer
from confide.workers.insights import INSIGHT_PROMPT, MAX_CONTEXT_CHARS, conversation_snippet
from confide.workers.memory_jobs import MemoryJobs
from confide.workers.worker import Worker

ACCOUNT = "acct-1"
USER = "ann"
SUMMARY = json.dumps({"summary": "Ann talked about her family and her garden.", "facts": []})
INSIGHT = json.dumps({"insights": [{"summary": "The user misses her sister.", "tags": []}]})
LAST = (
    ("user", "My sister Maya moved to Lisbon last month."),
    ("assistant", "That is a big change. Do you miss her?"),
    ("user", "Very much, we used to walk by the river every Sunday."),
)


def _with_model(settings: Settings, server: ScriptedLLMServer) -> Settings:
    return settings.model_copy(update={"llm_base_url": server.base_url, "llm_model": "scripted"})


def _lines(count: int) -> list[tuple[str, str]]:
    """``count`` messages, the last three of them :data:`LAST`."""
    filler = [
        ("user" if i % 2 == 0 else "assistant", f"small talk number {i} about the weather")
        for i in range(count - len(LAST))
    ]
    return filler + list(LAST)


def _insight_prompts(server: ScriptedLLMServer) -> list[str]:
    return [
        str(r.messages[1]["content"])
        for r in server.requests
        if r.messages[0]["content"] == INSIGHT_PROMPT
    ]


def test_the_snippet_keeps_the_latest_messages_within_the_bound() -> None:
    assert conversation_snippet(LAST) == (
        "user: My sister Maya moved to Lisbon last month.\n"
        "assistant: That is a big change. Do you miss her?\n"
        "user: Very much, we used to walk by the river every Sunday."
    )
    long = conversation_snippet([("user", "x " * 800), *LAST])
    assert len(long) == MAX_CONTEXT_CHARS and long.endswith("every Sunday.")
    assert conversation_snippet(LAST, limit=20) == " river every Sunday."


def test_a_chat_summary_queues_insights_that_read_the_conversation(
    engine: MemoryEngine, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    with ScriptedLLMServer() as server:
        server.enqueue(SUMMARY, INSIGHT)
        model_settings = _with_model(settings, server)
        memory = Confide(engine, embedder=None, settings=model_settings)
        for role, content in _lines(31):  # the 31st message makes the summary
            memory.add_message(
                account_id=ACCOUNT, user_id=USER, conversation_id="c1", role=role, content=content
            )
        [job] = SqlJobTables(engine.storage.database).jobs(kind="insights")
        assert job.payload == {"user_id": USER, "conversation_id": "c1"}  # ids only
        worker = Worker(engine, model_settings)
        MemoryJobs(llm=memory.chat.llm).register(worker)
        report = worker.run_once(kinds=["insights"], schedules=False)
        assert report.done == 1
        [prompt] = _insight_prompts(server)
    context = prompt.split("Recent conversation:\n", 1)[1]
    assert " ".join(conversation_snippet(LAST).split()) in context
    assert context.startswith("user: small talk") or context.startswith("assistant: small")
    assert len(context) <= MAX_CONTEXT_CHARS
    assert "Lisbon" not in caplog.text and "river" not in caplog.text


def test_without_a_model_no_insights_are_queued(engine: MemoryEngine) -> None:
    memory = Confide(engine, embedder=None)
    for role, content in _lines(31):
        memory.add_message(
            account_id=ACCOUNT, user_id=USER, conversation_id="c1", role=role, content=content
        )
    assert SqlMessageTables(engine.storage).summaries(ACCOUNT, "c1")  # the offline summary was made
    assert SqlJobTables(engine.storage.database).jobs(kind="insights") == []
