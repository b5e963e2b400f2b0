"""Conformance: the insight job over a real store, its model a scripted server over HTTP.

Happy path (inputs, prompt, limits, what is stored), an empty list, the 24-hour skip, the
three-insight cap and the writing rules, the budget, and a failed or malformed answer that
leaves the data as it was and raises the :class:`ProviderError` a worker retries.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import ProviderError
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.storage.apps import SqlAppTables
from confide.testing.conformance.harness import StorageHarness
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply
from confide.types import Memory, MemoryFilter, MemoryType, Source, utcnow
from confide.workers.insights import INSIGHT_CATEGORY, INSIGHT_PROMPT, InsightReport, InsightWriter

ACCOUNT = "acct-insights"
USER = "user-1"

CALM = "The user seems to draw calm from a steady morning routine."
OUTDOORS = '- "The user values time outdoors in the garden."'
COMFORT = "The user finds comfort in the garden."
STEADY = "The user keeps a steady routine."
MIXED = (
    "I think the user is lonely.",
    "She likes mornings.",
    "The user values a quiet start to the day.",
    "The user cares about the garden.",
    "The user enjoys long walks.",
)
SCRIPTED_INSIGHTS = (CALM, OUTDOORS, COMFORT, STEADY, *MIXED[:3])
"""The insights the scripted model writes in these tests and the job reads (the first
three of an answer), for the writing rules' first-pass figure (``bench/writing_rules.py``)."""


def _answer(*summaries: str, tags: tuple[str, ...] = ("routine",)) -> str:
    return json.dumps(
        {"insights": [{"summary": s, "tags": list(tags), "importance": 4} for s in summaries]}
    )


def _seed(engine: MemoryEngine, *, episodes: int = 2, facts: int = 2) -> None:
    for n in range(episodes):
        engine.store(
            {
                "account_id": ACCOUNT,
                "user_id": USER,
                "key": f"conversation_summary.{n}",
                "value": f"The user talked about the garden on day {n}.",
                "type": MemoryType.EPISODIC,
            }
        )
    for n in range(facts):
        engine.store(
            {
                "account_id": ACCOUNT,
                "user_id": USER,
                "key": f"note.{n}",
                "value": f"The user walks {n + 1} miles every morning.",
                "type": MemoryType.FACT,
            }
        )


def _all(engine: MemoryEngine) -> list[Memory]:
    return engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id=USER), limit=1000)


def _insights(engine: MemoryEngine) -> list[Memory]:
    flt = MemoryFilter(account_id=ACCOUNT, user_id=USER, types=(MemoryType.INSIGHT,))
    return engine.list_memories(flt, limit=100)


class InsightsConformance(StorageHarness):
    """The insight job (:class:`InsightWriter`) on this backend."""

    @pytest.fixture
    def llm_server(self) -> Iterator[ScriptedLLMServer]:
        """A scripted OpenAI-compatible server on loopback."""
        with ScriptedLLMServer() as server:
            yield server

    @pytest.fixture
    def ledger(self, engine: MemoryEngine) -> UsageLedger:
        """The usage ledger in this store."""
        return UsageLedger(SqlAppTables(engine.storage))

    def _insight_writer(
        self,
        engine: MemoryEngine,
        settings: Settings,
        server: ScriptedLLMServer,
        ledger: UsageLedger,
    ) -> InsightWriter:
        llm = MeteredLLM(OpenAICompatibleLLM(base_url=server.base_url, model="scripted"), ledger)
        return InsightWriter(engine, llm, settings, ledger=ledger, timeout=5.0)

    def _insight_run(self, writer: InsightWriter, **kwargs: Any) -> InsightReport:
        return asyncio.run(writer.run_user(account_id=ACCOUNT, user_id=USER, **kwargs))

    def test_insight_job_stores_insights_from_the_three_inputs(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        ledger: UsageLedger,
    ) -> None:
        _seed(engine, episodes=7, facts=5)
        llm_server.enqueue(_answer(CALM, OUTDOORS))
        report = self._insight_run(
            self._insight_writer(engine, settings, llm_server, ledger),
            recent_context="x" * 400 + "The user said the roses bloomed early." * 50,
        )
        assert (report.proposed, report.stored, report.rejected, report.first_pass) == (2, 2, 0, 1)
        (request,) = llm_server.requests
        assert request.json["temperature"] == 0.0 and request.json["max_tokens"] == 220
        system, user = request.messages
        assert system == {"role": "system", "content": INSIGHT_PROMPT}
        activity, facts, context = user["content"].split("\n\n")
        assert len(activity.splitlines()) == 1 + 5  # the latest five activity items
        assert len(facts.splitlines()) == 1 + 3  # at most three new semantic memories
        assert len(context.splitlines()[1]) == 1000  # the last 1,000 characters
        stored = sorted(_insights(engine), key=lambda m: m.value)
        assert [m.value for m in stored] == [CALM, "The user values time outdoors in the garden."]
        assert {m.id for m in stored} == set(report.memory_ids)
        for memory in stored:
            assert (memory.category, memory.importance, memory.source) == (
                INSIGHT_CATEGORY,
                2,
                Source.INSIGHT,
            )
            assert memory.tags == ("routine",)
        [usage] = ledger.report(ACCOUNT, since=None).operations
        assert (usage.operation, usage.calls) == ("insights", 1)

    def test_insight_job_an_empty_list_stores_nothing_and_does_not_start_the_24h_window(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        ledger: UsageLedger,
    ) -> None:
        _seed(engine)
        before = _all(engine)
        llm_server.enqueue(_answer(), _answer())
        writer = self._insight_writer(engine, settings, llm_server, ledger)
        assert self._insight_run(writer).stored == 0
        assert _all(engine) == before
        assert self._insight_run(writer).skipped is None  # nothing stored: the next run asks again
        assert len(llm_server.requests) == 2

    def test_insight_job_a_user_with_an_insight_in_24h_is_skipped(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        ledger: UsageLedger,
    ) -> None:
        _seed(engine)
        llm_server.enqueue(_answer(COMFORT))
        writer = self._insight_writer(engine, settings, llm_server, ledger)
        assert self._insight_run(writer).stored == 1
        later = utcnow() + timedelta(hours=23)
        assert self._insight_run(writer, now=later).skipped == "recent_insight"
        engine.forget(_insights(engine)[0].id, account_id=ACCOUNT)
        assert self._insight_run(writer, now=later).skipped == "recent_insight"  # forgotten counts
        assert len(llm_server.requests) == 1
        llm_server.enqueue(_answer(COMFORT, STEADY))  # a forgotten one may come back
        report = self._insight_run(writer, now=utcnow() + timedelta(hours=25))
        assert (report.skipped, report.stored, report.duplicates) == (None, 2, 0)
        llm_server.enqueue(_answer("The user finds comfort in the garden!", MIXED[3]))
        report = self._insight_run(writer, now=utcnow() + timedelta(hours=50))
        assert (report.stored, report.duplicates) == (1, 1)  # an active twin is not stored

    def test_insight_job_at_most_three_insights_and_the_writing_rules_apply(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        ledger: UsageLedger,
    ) -> None:
        _seed(engine)
        llm_server.enqueue(_answer(*MIXED))
        report = self._insight_run(self._insight_writer(engine, settings, llm_server, ledger))
        assert (report.proposed, report.rejected, report.stored) == (3, 2, 1)
        [stored] = _insights(engine)
        assert stored.value == MIXED[2]

    def test_insight_job_nothing_to_read_or_no_budget_makes_no_call(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        ledger: UsageLedger,
    ) -> None:
        writer = self._insight_writer(engine, settings, llm_server, ledger)
        assert self._insight_run(writer).skipped == "no_input"
        _seed(engine)
        ledger.budget_units = 1.0
        ledger.record(
            account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=1000,
            completion_tokens=0,
        )  # fmt: skip
        assert self._insight_run(writer).skipped == "budget"
        no_llm = InsightWriter(engine, None, settings)
        assert asyncio.run(no_llm.run_user(account_id=ACCOUNT, user_id=USER)).skipped == "no_llm"
        assert llm_server.requests == []

    @pytest.mark.parametrize(
        "reply",
        [
            ScriptedReply(content="The user likes gardens."),
            ScriptedReply(content='{"insights": "none"}'),
            ScriptedReply(content='{"insights": [{"tags": []}]}'),
            ScriptedReply(status=503, body=b'{"error": "busy"}'),
        ],
        ids=["prose", "not-a-list", "no-summary", "http-503"],
    )
    def test_insight_job_a_failed_or_malformed_answer_leaves_the_data_and_raises(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        ledger: UsageLedger,
        reply: ScriptedReply,
    ) -> None:
        _seed(engine)
        before = _all(engine)
        llm_server.enqueue(reply, _answer(COMFORT))
        writer = self._insight_writer(engine, settings, llm_server, ledger)
        with pytest.raises(ProviderError):
            self._insight_run(writer)
        assert _all(engine) == before
        assert self._insight_run(writer).stored == 1  # the retry succeeds
