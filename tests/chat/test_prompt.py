"""Agent profiles and the two delivery modes: the static prompt never carries memory,
messages or facts and keeps its bytes across turns; instructions mode writes memory in."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from confide.chat import ChatMemory
from confide.chat.prompt import build_static_prompt
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.retrieval.categories import load_categories
from confide.retrieval.profiles import AgentProfile, DeliveryMode
from confide.testing.builders import add

ACCOUNT = "acct-1"
PROFILES = """
categories:
  system:
    fact: {context: rag}
allowlists:
  concierge: ["*"]
  voice: ["*"]
profiles:
  concierge:
    identity: You are Juno, the concierge of Maple House.
    personality: Calm and precise.
    knowledge: ["Breakfast is served from 7 to 10."]
    goals: ["Help residents plan their day."]
    channel_guidelines: {web: "Use short paragraphs.", sms: "At most 300 characters."}
    policies: ["Never give medical advice."]
    escalation_rules: ["A fall or chest pain: call the duty nurse."]
    examples:
      - {user: "When is breakfast?", assistant: "From 7 to 10 in the dining room."}
  voice:
    identity: You are Juno on the phone.
    delivery: instructions
"""
SECRETS = ("xylophone-marmot", "quibblezap", "vermilion-tapir")


def _profiles(tmp_path: Path) -> dict[str, AgentProfile]:
    path = tmp_path / "agents.yaml"
    path.write_text(PROFILES, encoding="utf-8")
    config = load_categories(path)
    return {"concierge": config.profile("concierge"), "voice": config.profile("voice")}


def test_profiles_load_from_the_categories_yaml(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path)
    assert profiles["concierge"].delivery is DeliveryMode.HISTORY
    assert profiles["voice"].delivery is DeliveryMode.INSTRUCTIONS
    prompt = build_static_prompt(profiles["concierge"], channel="web")
    assert prompt == (
        "# Identity\nYou are Juno, the concierge of Maple House.\n\n"
        "## Personality\nCalm and precise.\n\n"
        "## Knowledge\n- Breakfast is served from 7 to 10.\n\n"
        "## Goals\n- Help residents plan their day.\n\n"
        "## Channel guidelines\n- Use short paragraphs.\n\n"
        "## Policies\n- Never give medical advice.\n\n"
        "## Escalation rules\n- A fall or chest pain: call the duty nurse.\n\n"
        "## Examples\nUser: When is breakfast?\nAssistant: From 7 to 10 in the dining room."
    )
    assert "sms: At most 300 characters." in build_static_prompt(profiles["concierge"])
    bad = tmp_path / "bad.yaml"
    bad.write_text(PROFILES.replace("delivery: instructions", "delivery: telepathy"))
    with pytest.raises(ValidationError, match=r"profiles\.voice\.delivery"):
        load_categories(bad)
    with pytest.raises(ValidationError, match="no profile"):
        load_categories(tmp_path / "agents.yaml").profile("stranger")


def _say(chat: ChatMemory, i: int, text: str, user: str = "user-1", conv: str = "c1") -> None:
    chat.add_message(
        {
            "account_id": ACCOUNT,
            "user_id": user,
            "conversation_id": conv,
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            "subject_id": "rex",
        }
    )


def test_the_static_prompt_never_carries_memory_and_keeps_its_bytes(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    profile = _profiles(tmp_path)["concierge"]
    chat = ChatMemory(engine)  # offline summaries
    add(engine, key="marmot", value=f"The {SECRETS[0]} visits on Sundays", importance=4)
    prompts = []
    for i in range(31):
        text = f"My dog is called {SECRETS[1].title()}." if i == 0 else f"{SECRETS[2]} {i}"
        _say(chat, i, text)
        if i in (0, 15, 30):
            turn = chat.deliver(
                profile,
                f"tell me about the {SECRETS[0]} and {SECRETS[1]}",
                account_id=ACCOUNT,
                user_id="user-1",
                conversation_id="c1",
                channel="web",
            )
            prompts.append(turn)
    asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"))
    facts = chat.subject_facts(account_id=ACCOUNT, user_id="user-1", subject_id="rex")
    assert facts  # the summary found the dog's name
    chat.set_fact_visibility(
        account_id=ACCOUNT, user_id="user-1", fact_id=facts[0].id, visibility="shared"
    )
    last = chat.deliver(
        profile,
        f"tell me about the {SECRETS[0]} and {SECRETS[1]}",
        account_id=ACCOUNT,
        user_id="user-1",
        conversation_id="c1",
        channel="web",
    )
    prompts.append(last)
    static = build_static_prompt(profile, channel="web")
    assert {p.system_prompt for p in prompts} == {static}
    assert {p.system_prompt.encode() for p in prompts} == {static.encode()}
    for secret in SECRETS:
        assert secret not in static.lower()
    # The memory is there, in the context messages and the messages, not in the prompt.
    context = "\n".join(c.content for c in last.context_messages).lower()
    assert SECRETS[0] in context and SECRETS[1] in context
    assert any(SECRETS[2] in m["content"] for m in last.messages)


def test_instructions_mode_writes_memory_and_shared_facts_into_the_prompt(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    voice = _profiles(tmp_path)["voice"]
    chat = ChatMemory(engine)
    for i in range(31):
        _say(chat, i, "My dog is called Quibblezap." if i == 0 else f"chat line {i}")
    asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"))
    add(engine, key="tea", value="Bob takes his tea black", user_id="user-2")
    [fact] = chat.subject_facts(account_id=ACCOUNT, user_id="user-1", subject_id="rex")

    def bobs_prompt() -> str:
        turn = chat.deliver(voice, "hello", account_id=ACCOUNT, user_id="user-2", subject_id="rex")
        assert turn.mode is DeliveryMode.INSTRUCTIONS and turn.context_messages == []
        return turn.system_prompt

    prompt = bobs_prompt()
    assert prompt.startswith("# Identity\nYou are Juno on the phone.")
    assert "tea: Bob takes his tea black" in prompt
    assert "Quibblezap" not in prompt  # private to user-1
    chat.set_fact_visibility(
        account_id=ACCOUNT, user_id="user-1", fact_id=fact.id, visibility="shared"
    )
    assert bobs_prompt().endswith(
        "Known facts about rex from conversations:\n"
        "- [relationship] The user's dog is called Quibblezap. (shared)"
    )
    chat.set_fact_visibility(
        account_id=ACCOUNT, user_id="user-1", fact_id=fact.id, visibility="private"
    )
    assert "Quibblezap" not in bobs_prompt()
