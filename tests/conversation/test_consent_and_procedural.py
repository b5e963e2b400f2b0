"""Consent on the live tool path and procedural memories, on both backends."""

from __future__ import annotations

import json

import pytest

from confide.conversation.buffer import Session, SessionBuffer
from confide.conversation.consent import CONSENTED_IN_CONVERSATION, ConsentPolicy, Signal
from confide.conversation.dispatcher import EngineDispatcher
from confide.conversation.extraction import ProposedChange
from confide.conversation.procedural import (
    ProceduralGate,
    in_default_context,
    is_explicit_request,
    numbered_steps,
)
from confide.conversation.proposals import ProposalStore
from confide.engine import MemoryEngine
from confide.storage.service.sessions import SqlServiceTables
from confide.types import HistoryEventType, MemoryFilter, MemoryType

ACCOUNT = "acct-1"


def _wired(engine: MemoryEngine) -> tuple[EngineDispatcher, ProposalStore, SessionBuffer, Session]:
    buffer = SessionBuffer()
    live = buffer.start("s1", account_id=ACCOUNT, user_id="u1")
    proposals = ProposalStore(engine, SqlServiceTables(engine.storage.database))

    def user_turns(session_id: str) -> list[str]:
        found = buffer.get(session_id)
        return [] if found is None else [t.summary for t in found.turns if t.speaker == "user"]

    dispatcher = EngineDispatcher(engine, proposals=proposals, user_turns=user_turns)
    return dispatcher, proposals, buffer, live


def _stored(engine: MemoryEngine) -> dict[str, str]:
    memories = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="u1"))
    return {m.key: m.value for m in memories}


def _actors(engine: MemoryEngine, memory_id: str) -> list[str | None]:
    return [e.actor for e in engine.history(memory_id, account_id=ACCOUNT)]


@pytest.mark.asyncio
async def test_a_live_sensitive_write_applies_as_consented_in_the_conversation(
    engine: MemoryEngine,
) -> None:
    dispatcher, proposals, _, live = _wired(engine)
    call = json.dumps({"memory_type": "preference", "key": "Preferred_Name", "value": "Annie"})
    stored = await dispatcher.dispatch("store_memory", call, live)
    assert stored["action"] == "created" and "proposalId" not in stored
    assert _stored(engine) == {"preferred_name": "Annie"}  # the key's canonical spelling
    assert _actors(engine, stored["memoryId"]) == [CONSENTED_IN_CONVERSATION]
    assert proposals.pending(account_id=ACCOUNT, user_id="u1") == []
    # A change said in the call applies too, and so does an unsure one.
    change = json.dumps({"existing_key": "preferred_name", "new_value": "Ann", "confidence": 0.3})
    changed = await dispatcher.dispatch("update_memory", change, live)
    assert changed["action"] == "updated" and _stored(engine) == {"preferred_name": "Ann"}
    assert _actors(engine, changed["memoryId"])[0] == CONSENTED_IN_CONVERSATION
    ops = engine.op_counts(by="status", account_id=ACCOUNT)
    assert ops.get("consented") == 2 and "proposed" not in ops


@pytest.mark.asyncio
async def test_a_live_write_settles_the_keys_pending_proposals(engine: MemoryEngine) -> None:
    dispatcher, proposals, _, live = _wired(engine)

    def proposed(value: str) -> str:
        return proposals.file(
            ProposedChange(account_id=ACCOUNT, user_id="u1", key="city", current_value=None,
                           proposed_value=value, type=MemoryType.FACT, confidence=0.9,
                           session_id="s0")
        )  # fmt: skip

    proposed("Lisbon")
    same = proposed("Porto")
    call = json.dumps({"memory_type": "fact", "key": "city", "value": "Porto"})
    stored = await dispatcher.dispatch("store_memory", call, live)
    assert stored["action"] == "created" and _stored(engine) == {"city": "Porto"}
    assert proposals.pending(account_id=ACCOUNT, user_id="u1") == []
    assert proposals.get(same, account_id=ACCOUNT).status == "confirmed"
    decisions = {
        e.meta["decision"]
        for e in engine.history(stored["memoryId"], account_id=ACCOUNT)
        if e.event is HistoryEventType.PROPOSAL
    }
    assert decisions == {"confirmed", "superseded"}


@pytest.mark.asyncio
async def test_a_benign_live_write_applies_and_only_an_uncorroborated_one_names_consent(
    engine: MemoryEngine,
) -> None:
    dispatcher, proposals, buffer, live = _wired(engine)
    # Live, but neither confident nor said by the user in this session: an inference with
    # one signal would wait; the user's word in the call applies it, audited as consented.
    unsure = {"memory_type": "fact", "key": "car", "value": "a red Volvo", "confidence": 0.4}
    applied = await dispatcher.dispatch("store_memory", json.dumps(unsure), live)
    assert applied["action"] == "created" and _stored(engine) == {"car": "a red Volvo"}
    assert _actors(engine, applied["memoryId"]) == [CONSENTED_IN_CONVERSATION]
    # The user's own words corroborate an unsure write (live + heard): a plain agent write.
    buffer.add_turn("s1", "user", "My sister has a blue Fiat.")
    heard = {"memory_type": "fact", "key": "sister_car", "value": "a blue Fiat", "confidence": 0.4}
    corroborated = await dispatcher.dispatch("store_memory", json.dumps(heard), live)
    assert _actors(engine, corroborated["memoryId"]) == ["agent"]
    # A plain call (confidence 1 by default) is live and confident: a plain agent write too.
    plain = {"memory_type": "fact", "key": "pet", "value": "a cat"}
    created = await dispatcher.dispatch("store_memory", json.dumps(plain), live)
    assert _actors(engine, created["memoryId"]) == ["agent"]
    assert proposals.pending(account_id=ACCOUNT, user_id="u1") == []


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
