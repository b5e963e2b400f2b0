"""Conformance: the multi-fact pass over a real store, its model a scripted server over HTTP.

A long turn's facts stored (at most three a turn), a short turn left alone, no call without
a model or over the account's budget, extraction's de-duplication, the per-user daily cap, a
saved chat message read by ids alone, and a failed or malformed answer that leaves the data
as it was and raises the :class:`ProviderError` a worker retries.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from confide.chat.messages import MessageStore
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, ProviderError, ValidationError
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.storage.apps import SqlAppTables
from confide.testing.conformance.harness import StorageHarness
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply
from confide.types import Memory, MemoryFilter, MemoryType, Source
from confide.workers.multifact import MultiFactPass, MultiFactReport

ACCOUNT = "acct-multifact"
USER = "user-1"

TURN = (
    "Let me tell you a bit about my life these days. My dog Biscuit is a beagle and he keeps "
    "me busy. I walk him every morning along the river. My daughter Sarah lives in Boston "
    "and calls me on Sundays. I have also started learning Spanish at the community center, "
    "which I enjoy a lot."
)
FACTS = [
    ("fact", "pet_dog_name", "The user's dog Biscuit is a beagle."),
    ("preference", "routine", "The user walks the dog every morning along the river."),
    ("fact", "daughter_name", "The user's daughter Sarah lives in Boston."),
    ("preference", "likes", "The user enjoys learning Spanish at the community center."),
]

NEVER_SAID = ("fact", "car", "The user drives a red sports car.")
FIRST_PERSON = ("fact", "mood", "I feel busy.")
SCRIPTED_FACTS = tuple(v for _, _, v in [*FACTS, NEVER_SAID, FIRST_PERSON])
"""The candidate values the scripted model writes in these tests, for the writing rules'
first-pass figure (``bench/writing_rules.py``)."""


def _answer(facts: list[tuple[str, str, str]]) -> str:
    return json.dumps([{"type": t, "key": k, "value": v, "confidence": 0.9} for t, k, v in facts])


def _all(engine: MemoryEngine) -> list[Memory]:
    return engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id=USER), limit=1000)


class MultiFactConformance(StorageHarness):
    """The multi-fact pass (:class:`MultiFactPass`) on this backend."""

    @pytest.fixture
    def llm_server(self) -> Iterator[ScriptedLLMServer]:
        """A scripted OpenAI-compatible server on loopback."""
        with ScriptedLLMServer() as server:
            yield server

    def _multifact_pass(
        self, engine: MemoryEngine, settings: Settings, server: ScriptedLLMServer, **changes: Any
    ) -> MultiFactPass:
        ledger = UsageLedger(SqlAppTables(engine.storage))
        llm = MeteredLLM(OpenAICompatibleLLM(base_url=server.base_url, model="scripted"), ledger)
        return MultiFactPass(
            engine, llm, settings.model_copy(update=changes), ledger=ledger, timeout=5.0
        )

    def _multifact_run(self, job: MultiFactPass, text: str = TURN) -> MultiFactReport:
        return asyncio.run(job.run_turn(account_id=ACCOUNT, user_id=USER, turn_text=text))

    def test_multifact_a_long_turn_stores_at_most_three_facts(
        self, engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
    ) -> None:
        llm_server.enqueue(_answer(FACTS))
        report = self._multifact_run(self._multifact_pass(engine, settings, llm_server))
        assert (report.candidates, report.stored, report.capped) == (4, 3, 1)
        assert report.first_pass == 4 and report.rejected == 0
        (request,) = llm_server.requests
        assert request.json["temperature"] == 0.0 and request.json["max_tokens"] == 400
        assert request.messages[1] == {"role": "user", "content": TURN}
        stored = _all(engine)
        assert sorted(m.value for m in stored) == sorted(v for _, _, v in FACTS[:3])
        for memory in stored:
            assert memory.source == Source.EXTRACTION
            assert memory.metadata["origin"] == "multifact"
        [usage] = UsageLedger(SqlAppTables(engine.storage)).report(ACCOUNT, since=None).operations
        assert (usage.operation, usage.calls) == ("multifact", 1)

    def test_multifact_a_short_turn_makes_no_call(
        self, engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
    ) -> None:
        job = self._multifact_pass(engine, settings, llm_server, multifact_min_chars=len(TURN))
        assert self._multifact_run(job).skipped == "short"
        assert llm_server.requests == [] and _all(engine) == []

    def test_multifact_no_model_or_no_budget_makes_no_call(
        self, engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
    ) -> None:
        job = self._multifact_pass(engine, settings, llm_server)
        assert job.ledger is not None
        job.ledger.budget_units = 1.0
        job.ledger.record(
            account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=1000,
            completion_tokens=0,
        )  # fmt: skip
        assert self._multifact_run(job).skipped == "budget"
        assert self._multifact_run(MultiFactPass(engine, None, settings)).skipped == "no_llm"
        assert llm_server.requests == [] and _all(engine) == []

    def test_multifact_candidates_pass_extractions_checks_and_dedup_bands(
        self, engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
    ) -> None:
        engine.store(
            {
                "account_id": ACCOUNT,
                "user_id": USER,
                "key": "likes",
                "value": "The user enjoys learning Spanish at the community center.",
                "type": MemoryType.PREFERENCE,
            }
        )
        llm_server.enqueue(
            _answer(
                [
                    FACTS[3],  # a near-twin of a stored memory: not stored twice
                    NEVER_SAID,
                    FIRST_PERSON,  # breaks the writing rules
                    FACTS[0],
                ]
            )
        )
        report = self._multifact_run(self._multifact_pass(engine, settings, llm_server))
        assert (report.duplicates, report.dropped_ungrounded, report.rejected) == (1, 1, 1)
        assert report.stored == 1
        assert sorted(m.key for m in _all(engine)) == ["likes", "pet_dog_name"]

    def test_multifact_the_daily_cap_counts_every_turn_of_the_day(
        self, engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
    ) -> None:
        job = self._multifact_pass(engine, settings, llm_server, multifact_daily_cap=4)
        llm_server.enqueue(_answer(FACTS[:3]), _answer([*FACTS[3:], FACTS[2]]))
        assert self._multifact_run(job).stored == 3
        second = self._multifact_run(job)
        assert second.stored == 1
        engine.forget(_all(engine)[0].id, account_id=ACCOUNT)  # forgetting gives nothing back
        assert self._multifact_run(job).skipped == "daily_cap"
        assert len(llm_server.requests) == 2

    def test_multifact_a_saved_chat_message_is_read_by_ids(
        self, engine: MemoryEngine, settings: Settings, llm_server: ScriptedLLMServer
    ) -> None:
        messages = MessageStore(engine)
        base = {"account_id": ACCOUNT, "user_id": USER, "conversation_id": "c1"}
        said = messages.add({**base, "role": "user", "content": TURN})
        reply = messages.add({**base, "role": "assistant", "content": TURN})
        llm_server.enqueue(_answer(FACTS[:1]))
        job = self._multifact_pass(engine, settings, llm_server)

        def run(index: int, user: str = USER) -> MultiFactReport:
            return asyncio.run(
                job.run_message(account_id=ACCOUNT, user_id=user, conversation_id="c1", index=index)
            )

        assert run(said.index).stored == 1
        assert llm_server.requests[0].messages[1]["content"] == TURN
        with pytest.raises(ValidationError):
            run(reply.index)
        with pytest.raises(NotFoundError):
            run(said.index, user="user-2")
        with pytest.raises(NotFoundError):
            run(99)

    @pytest.mark.parametrize(
        "reply",
        [
            ScriptedReply(content="The user has a dog."),
            ScriptedReply(status=503, body=b'{"error": "busy"}'),
            ScriptedReply(drop=True),
        ],
        ids=["prose", "http-503", "dropped"],
    )
    def test_multifact_a_failed_or_malformed_answer_leaves_the_data_and_raises(
        self,
        engine: MemoryEngine,
        settings: Settings,
        llm_server: ScriptedLLMServer,
        reply: ScriptedReply,
    ) -> None:
        engine.store({"account_id": ACCOUNT, "user_id": USER, "key": "city", "value": "Boston"})
        before = _all(engine)
        llm_server.enqueue(reply, _answer(FACTS[:1]))
        job = self._multifact_pass(engine, settings, llm_server)
        with pytest.raises(ProviderError):
            self._multifact_run(job)
        assert _all(engine) == before
        assert self._multifact_run(job).stored == 1  # the retry succeeds
