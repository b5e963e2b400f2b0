"""Consent on the live tool path and procedural memories, on both backends."""

from __future__ import annotations

import json

import pytest

from confide.conversation.buffer import Session, SessionBuffer
from confide.conversation.consent import ConsentPolicy, Signal
from confide.conversation.dispatcher import EngineDispatcher
from confide.conversation.procedural import (
    ProceduralGate,
    in_default_context,
    is_explicit_request,
    numbered_steps,
)
from confide.conversation.proposals import ProposalStore
from confide.engine import MemoryEngine
from confide.types import MemoryFilter, MemoryType

ACCOUNT = "acct-1"


def _wired(engine: MemoryEngine) -> tuple[EngineDispatcher, ProposalStore, SessionBuffer, Session]:
    buffer = SessionBuffer()
    live = buffer.start("s1", account_id=ACCOUNT, user_id="u1")
    proposals = ProposalStore(engine, engine.service_tables())

    def user_turns(session_id: str) -> list[str]:
        found = buffer.get(session_id)
        return [] if found is None else [t.summary for t in found.turns if t.speaker == "user"]

    dispatcher = EngineDispatcher(engine, proposals=proposals, user_turns=user_turns)
    return dispatcher, proposals, buffer, live


def _stored(engine: MemoryEngine) -> dict[str, str]:
    memories = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="u1"))
    return {m.key: m.value for m in memories}


@pytest.mark.asyncio
async def test_a_live_sensitive_write_waits_until_it_is_said_again(engine: MemoryEngine) -> None:
    dispatcher, proposals, _, live = _wired(engine)
    call = json.dumps({"memory_type": "preference", "key": "preferred_name", "value": "Ana"})
    held = await dispatcher.dispatch("store_memory", call, live)
    assert held["action"] == "proposed" and held["memoryId"] is None and held["proposalId"]
    assert "confirms" in held["message"]
    assert _stored(engine) == {}
    (pending,) = proposals.pending(account_id=ACCOUNT, user_id="u1")
    assert (pending.key, pending.current_value, pending.proposed_value) == (
        "preferred_name",
        None,
        "Ana",
    )
    # Restated in a later live call: the user said it twice, so it applies.
    again = await dispatcher.dispatch("store_memory", call, live)
    assert again["action"] == "created" and _stored(engine) == {"preferred_name": "Ana"}
    assert proposals.pending(account_id=ACCOUNT, user_id="u1") == []
    # A different value waits again, the stored one untouched.
    change = json.dumps({"existing_key": "preferred_name", "new_value": "Anna"})
    assert (await dispatcher.dispatch("update_memory", change, live))["action"] == "proposed"
    assert _stored(engine) == {"preferred_name": "Ana"}
    assert engine.op_counts(by="op", account_id=ACCOUNT).get("hold") == 2


@pytest.mark.asyncio
async def test_a_benign_live_write_needs_a_second_signal(engine: MemoryEngine) -> None:
    dispatcher, proposals, buffer, live = _wired(engine)
    unsure = {"memory_type": "fact", "key": "car", "value": "a red Volvo", "confidence": 0.4}
    # Live, but neither confident nor said by the user in this session: held.
    held = await dispatcher.dispatch("store_memory", json.dumps(unsure), live)
    assert held["action"] == "proposed" and _stored(engine) == {}
    # The user's own words corroborate it (live + heard): it applies, settling the proposal.
    buffer.add_turn("s1", "user", "I drive a red Volvo these days.")
    applied = await dispatcher.dispatch("store_memory", json.dumps(unsure), live)
    assert applied["action"] == "created" and _stored(engine) == {"car": "a red Volvo"}
    assert proposals.pending(account_id=ACCOUNT, user_id="u1") == []
    # A plain call (confidence 1 by default) is live and confident: it applies at once.
    plain = {"memory_type": "fact", "key": "pet", "value": "a cat"}
    assert (await dispatcher.dispatch("store_memory", json.dumps(plain), live))["action"] == (
        "created"
    )


def test_signals_are_counted_as_documented() -> None:
    policy = ConsentPolicy.of(["City"])
    assert policy.is_sensitive("city") and not policy.is_sensitive("car")
    turns = ["I drive a red Volvo.", "The Volvo is red, yes."]
    assert policy.signals(value="red Volvo", confidence=0.9, live=True, user_turns=turns) == {
        Signal.LIVE,
        Signal.CONFIDENT,
        Signal.HEARD,
        Signal.REPEATED,
    }
    assert policy.signals(value="red Volvo", confidence=0.2, live=False) == frozenset()
    lone = policy.signals(value="red Volvo", confidence=0.2, live=False, pending_same=True)
    assert lone == {Signal.REPEATED} and not policy.corroborated(lone)


def test_numbered_steps_accept_procedures_only() -> None:
    assert numbered_steps("1. Boil the water. 2. Steep the tea for four minutes. 3) Add lemon") == (
        "1. Boil the water.\n2. Steep the tea for four minutes.\n3. Add lemon."
    )
    assert numbered_steps("Steps: 1. ask how I slept 2. remind me about my pills") == (
        "1. Ask how I slept.\n2. Remind me about my pills."
    )
    assert numbered_steps("Boil the water, then steep it") == "1. Boil the water.\n2. Steep it."
    for not_steps in (
        "speak slower",  # one instruction: a preference
        "I walk every morning then I eat",  # statements
        "She likes tea; the user walks",
        "First of all 1. boil 2. steep",  # prose before the numbers
    ):
        assert numbered_steps(not_steps) is None, not_steps


def test_the_gate_and_the_explicit_request() -> None:
    gate = ProceduralGate(min_confidence=0.9)
    steps = "1. Boil the water. 2. Steep the tea."
    assert gate.admit(value=steps, confidence=0.95, explicit=False)[0] is MemoryType.PROCEDURAL
    assert gate.admit(value=steps, confidence=0.5, explicit=True)[0] is MemoryType.PROCEDURAL
    assert gate.admit(value=steps, confidence=0.5, explicit=False) == (
        MemoryType.PREFERENCE,
        steps,
    )
    assert gate.admit(value="speak slower", confidence=1.0, explicit=True) == (
        MemoryType.PREFERENCE,
        "speak slower",
    )
    assert is_explicit_request("Please remember how I take my tea: boil it, then steep it.")
    assert is_explicit_request("Here's how you do it")
    assert not is_explicit_request("I like my tea strong.")


@pytest.mark.asyncio
async def test_a_procedural_tool_write_is_steps_or_a_preference(engine: MemoryEngine) -> None:
    dispatcher, _, _, live = _wired(engine)
    steps = {"memory_type": "procedural", "key": "tea_steps",
             "value": "1. Boil the water 2. Steep the tea for four minutes"}  # fmt: skip
    habit = {"memory_type": "procedural", "key": "communication_style", "value": "speak slower"}
    await dispatcher.dispatch("store_memory", json.dumps(steps), live)
    await dispatcher.dispatch("store_memory", json.dumps(habit), live)
    by_key = {
        m.key: m for m in engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="u1"))
    }
    assert by_key["tea_steps"].type is MemoryType.PROCEDURAL
    assert by_key["tea_steps"].value == "1. Boil the water.\n2. Steep the tea for four minutes."
    assert by_key["communication_style"].type is MemoryType.PREFERENCE
    assert not in_default_context(by_key["tea_steps"])
    assert in_default_context(by_key["communication_style"])
