"""The LLM usage ledger on both backends: every call of app memories and chat summaries is
recorded with operation, scope, tokens and cost units; polls see what came since the last
one; below 20% of the daily budget app memory work is deferred (sealed) and resumes when the
budget refills."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import time_machine
from tests.apps.conftest import ACCOUNT, ApiFactory, llm_of, transcript

from confide.apps import AppMemories
from confide.chat import ChatMemory
from confide.client import Confide
from confide.config import LLMPrice, Settings
from confide.engine import MemoryEngine
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.storage.apps import SqlAppTables
from confide.storage.chat import SqlMessageTables
from confide.storage.jobs import JobState, SqlJobTables
from confide.testing.scripted_llm import ScriptedLLMServer
from confide.workers import Worker, register_conversation_jobs
from confide.workers.conversation_jobs import APP_RESUME, enqueue_app_resume

PARAGRAPH = "The user prefers option 1 for the report."
SECOND = "The user prefers option 2 for the report."
THIRD = "The user prefers option 3 for the report."
DAY = 86_400.0


def _llm_settings(settings: Settings, server: ScriptedLLMServer, **extra: object) -> Settings:
    return settings.model_copy(
        update={"llm_base_url": server.base_url, "llm_model": "scripted", **extra}
    )


def test_every_call_is_in_the_ledger_and_polls_see_what_is_new(
    engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
) -> None:
    summary = json.dumps({"summary": "The user and the assistant talked.", "facts": []})
    llm_server.enqueue(PARAGRAPH, summary)
    prices = {"app_memory": LLMPrice(prompt_per_1k=0, completion_per_1k=0, per_call=5)}
    sdk = Confide(
        engine,
        embedder=None,
        settings=_llm_settings(
            settings, llm_server, llm_prices=prices, summary_trigger=2, summary_batch=2
        ),
    )
    assert sdk.usage_since_last_poll(account_id=ACCOUNT).operations == ()
    sdk.end_app_conversation("notes", "c1", transcript(1), account_id=ACCOUNT)
    for n in range(3):
        sdk.add_message(
            account_id=ACCOUNT, user_id="u1", conversation_id="chat-1",
            role="user", content=f"line {n}",
        )  # fmt: skip
    report = sdk.usage_since_last_poll(account_id=ACCOUNT)
    by_op = {o.operation: o for o in report.operations}
    assert set(by_op) == {"app_memory", "chat_summary"}
    assert by_op["app_memory"].calls == 1 and by_op["app_memory"].cost_units == 5.0
    assert by_op["app_memory"].prompt_tokens > 10
    assert by_op["app_memory"].completion_tokens == len(PARAGRAPH) // 4 + 1
    default = LLMPrice()
    chat = by_op["chat_summary"]
    assert chat.cost_units == pytest.approx(
        chat.prompt_tokens * default.prompt_per_1k / 1000
        + chat.completion_tokens * default.completion_per_1k / 1000
    )
    assert len(llm_server.requests) == 2
    assert sdk.usage_since_last_poll(account_id=ACCOUNT).operations == ()
    # Another caller polls on its own.
    assert sdk.usage_since_last_poll(account_id=ACCOUNT, caller="other").calls == 2


ONE_AM = datetime(2027, 1, 15, 1, tzinfo=UTC)
"""One hour into a UTC day: a test's budget day does not end while it runs."""


class Clock:
    """The budget's clock: the wall clock (pinned to :data:`ONE_AM` by the tests that use
    it, so what the engine stamps and what the ledger and the worker read agree) plus the
    time a test moves it on (``clock.now += DAY``)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    @property
    def now(self) -> float:
        return time.time() + self.ahead

    @now.setter
    def now(self, value: float) -> None:
        self.ahead += value - self.now

    def __call__(self) -> float:
        return self.now


def _budgeted(
    engine: MemoryEngine, server: ScriptedLLMServer, clock: Clock
) -> tuple[AppMemories, UsageLedger]:
    ledger = UsageLedger(
        SqlAppTables(engine.storage),
        prices={"*": LLMPrice(prompt_per_1k=0, completion_per_1k=0, per_call=1)},
        budget_units=10,
        clock=clock,
    )
    return AppMemories(engine, llm=MeteredLLM(llm_of(server), ledger), ledger=ledger), ledger


def _end(apps: AppMemories, n: int) -> bool:
    outcome = asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT, app_id="notes", conversation_id=f"c{n}", messages=transcript(n)
        )
    )
    return outcome.deferred


@time_machine.travel(ONE_AM, tick=True)
def test_below_20_percent_work_is_deferred_then_resumes(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    clock = Clock()
    apps, ledger = _budgeted(engine, llm_server, clock)
    ledger.record(
        account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=0,
        completion_tokens=0, calls=8,
    )  # fmt: skip
    assert ledger.remaining_fraction(ACCOUNT) == pytest.approx(0.2)
    llm_server.enqueue(PARAGRAPH)
    assert not _end(apps, 1)  # exactly 20% left: not below
    assert ledger.remaining_fraction(ACCOUNT) == pytest.approx(0.1)
    assert _end(apps, 2) and _end(apps, 3)
    assert len(llm_server.requests) == 1  # deferred work made no call
    assert apps.deferred_count(ACCOUNT) == 2
    assert [m.metadata["conversation_id"] for m in apps.memories(ACCOUNT, "notes")] == ["c1"]
    rows = SqlAppTables(engine.storage).deferred(ACCOUNT, 10)
    assert all(b"option" not in row.ciphertext for row in rows)  # sealed, not in clear
    # Still below: nothing resumes. A new UTC day refills the budget.
    assert asyncio.run(apps.resume_deferred(ACCOUNT)) == 0
    clock.now += DAY
    llm_server.enqueue(SECOND, THIRD)
    assert asyncio.run(apps.resume_deferred(ACCOUNT)) == 2
    assert apps.deferred_count(ACCOUNT) == 0
    memories = apps.memories(ACCOUNT, "notes")
    assert [(m.metadata["conversation_id"], m.value) for m in memories] == [
        ("c3", THIRD),
        ("c2", SECOND),
        ("c1", PARAGRAPH),
    ]
    assert ledger.remaining_fraction(ACCOUNT) == pytest.approx(0.8)


@dataclass
class _Parts:
    chat: ChatMemory
    apps: AppMemories


@time_machine.travel(ONE_AM, tick=True)
def test_deferred_work_queues_one_app_resume_job_a_worker_runs_when_the_budget_refills(
    engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
) -> None:
    clock = Clock()
    apps, ledger = _budgeted(engine, llm_server, clock)
    apps.on_defer = lambda account_id: enqueue_app_resume(engine, account_id=account_id)
    ledger.record(
        account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=0,
        completion_tokens=0, calls=9,
    )  # fmt: skip
    assert _end(apps, 1) and _end(apps, 2)
    queue = SqlJobTables(engine.storage.database)
    queued = queue.jobs(kind=APP_RESUME, state=JobState.QUEUED)
    [job] = [j for j in queued if j.account_id == ACCOUNT]  # one for both ends
    assert job.payload == {}
    worker = Worker(engine, settings, usage=ledger, clock=clock)
    register_conversation_jobs(worker, _Parts(ChatMemory(engine), apps))
    # Over the budget the worker holds the job for the next budget day, attempt unspent.
    held = worker.run_once(kinds=[APP_RESUME])
    assert (held.deferred, held.done) == (1, 0)
    assert apps.deferred_count(ACCOUNT) == 2 and llm_server.requests == []
    clock.now += DAY
    llm_server.enqueue(PARAGRAPH, SECOND)
    ran = worker.run_once(kinds=[APP_RESUME])
    assert ran.done == 1
    assert apps.deferred_count(ACCOUNT) == 0
    assert sorted(m.metadata["conversation_id"] for m in apps.memories(ACCOUNT, "notes")) == [
        "c1",
        "c2",
    ]
    finished = queue.get_job(job.id)
    assert finished is not None and finished.state == JobState.DONE


def test_without_an_llm_nothing_is_deferred(engine: MemoryEngine) -> None:
    ledger = UsageLedger(SqlAppTables(engine.storage), budget_units=1)
    ledger.record(
        account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=0,
        completion_tokens=0, calls=1000,
    )  # fmt: skip
    apps = AppMemories(engine, llm=None, ledger=ledger)
    assert not _end(apps, 1)
    assert len(apps.memories(ACCOUNT, "notes")) == 1


@pytest.mark.asyncio
async def test_usage_route_and_metrics(apps_api: ApiFactory, llm_server: ScriptedLLMServer) -> None:
    llm_server.enqueue(PARAGRAPH)
    async with apps_api(
        llm_base_url=llm_server.base_url, llm_model="scripted", llm_budget_units=100.0
    ) as api:
        first = await api.client.get("/v1/usage", headers=api.headers())
        assert first.status_code == 200
        assert first.json()["since"] is None and first.json()["operations"] == []
        assert (await api.end("notes", "c1", {"messages": transcript(1)})).status_code == 202
        await api.join()
        body = (await api.client.get("/v1/usage", headers=api.headers())).json()
        assert set(body) == {"since", "until", "calls", "costUnits", "operations", "budget"}
        assert body["since"] is not None and body["calls"] == 1
        [op] = body["operations"]
        assert set(op) == {"operation", "calls", "promptTokens", "completionTokens", "costUnits"}
        assert op["operation"] == "app_memory"
        assert body["budget"]["units"] == 100.0 and 0.9 < body["budget"]["remainingFraction"] < 1
        again = (await api.client.get("/v1/usage", headers=api.headers())).json()
        assert again["operations"] == [] and again["calls"] == 0
        since = (
            await api.client.get(
                "/v1/usage", params={"since": "2000-01-01T00:00:00Z"}, headers=api.headers()
            )
        ).json()
        assert since["calls"] == 1
        bad = await api.client.get(
            "/v1/usage", params={"since": "yesterday"}, headers=api.headers()
        )
        assert bad.status_code == 400
        metrics = (await api.client.get("/metrics", headers=api.headers())).text
        assert 'confide_llm_calls_total{operation="app_memory"} 1' in metrics
        assert 'confide_llm_tokens_total{kind="completion",operation="app_memory"}' in metrics


@time_machine.travel(ONE_AM, tick=True)
def test_chat_summaries_wait_below_20_percent(
    engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
) -> None:
    clock = Clock()
    ledger = UsageLedger(
        SqlAppTables(engine.storage),
        prices={"*": LLMPrice(prompt_per_1k=0, completion_per_1k=0, per_call=1)},
        budget_units=10,
        clock=clock,
    )
    chat = ChatMemory(
        engine,
        settings=settings.model_copy(update={"summary_trigger": 2, "summary_batch": 2}),
        llm=MeteredLLM(llm_of(llm_server), ledger),
        ledger=ledger,
    )
    ledger.record(
        account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=0,
        completion_tokens=0, calls=9,
    )  # fmt: skip
    for n in range(3):
        chat.add_message(
            {"account_id": ACCOUNT, "user_id": "u1", "conversation_id": "chat-1",
             "role": "user", "content": f"line {n}"}
        )  # fmt: skip
    run = chat.summarise_if_due(account_id=ACCOUNT, conversation_id="chat-1")
    assert asyncio.run(run) is None
    assert llm_server.requests == []
    assert len(SqlMessageTables(engine.storage).unsummarised(ACCOUNT, "chat-1")) == 3
    clock.now += DAY
    llm_server.enqueue(json.dumps({"summary": "The user counted lines.", "facts": []}))
    outcome = asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="chat-1"))
    assert outcome is not None
    assert len(SqlMessageTables(engine.storage).unsummarised(ACCOUNT, "chat-1")) == 1
    assert ledger.report(ACCOUNT, since=ledger.day_start(), until=clock.now + 1).calls == 1


def test_extraction_is_metered_with_its_scope(
    engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue("[]")
    sdk = Confide(engine, embedder=None, settings=_llm_settings(settings, llm_server))
    sdk.add(
        [{"role": "user", "content": "My dog is called Rex."}], user_id="u1", account_id=ACCOUNT
    )
    [op] = sdk.usage_since_last_poll(account_id=ACCOUNT).operations
    assert (op.operation, op.calls) == ("extraction", 1)
    with engine.storage.reader_across_accounts() as db:  # type: ignore[attr-defined]
        rows = db.run("SELECT account_id, operation, scope, calls FROM llm_usage").fetchall()
    assert [tuple(r) for r in rows] == [(ACCOUNT, "extraction", "user:u1", 1)]
