"""The context text on both backends, exactly, through AppMemories and the SDK."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import time_machine
from tests.apps.conftest import ACCOUNT, transcript

from confide.apps import AppMemories, render_context
from confide.client import Confide
from confide.engine import MemoryEngine

# The test's clock: the text carries each memory's UTC date.
NOON = datetime(2027, 3, 1, 12, tzinfo=UTC)


@time_machine.travel(NOON, tick=True)
def test_exact_text_newest_first(engine: MemoryEngine) -> None:
    sdk = Confide(engine, embedder=None)
    sdk.apps.configure(ACCOUNT, "notes", name="Team Notes")
    for n in range(3):
        sdk.end_app_conversation("notes", f"c{n}", transcript(n), account_id=ACCOUNT)
    day = "2027-03-01"
    assert sdk.app_context("notes", account_id=ACCOUNT) == (
        "(memories for app: Team Notes)\n"
        "The following are memories from previous conversations with this app:\n"
        "\n"
        f"1. [Created: {day}] The user prefers option 2 for the report.\n"
        f"2. [Created: {day}] The user prefers option 1 for the report.\n"
        f"3. [Created: {day}] The user prefers option 0 for the report.\n"
        "\n"
        "Use these memories to provide context-aware responses."
    )


def test_name_defaults_to_the_app_id_and_empty_without_memories(engine: MemoryEngine) -> None:
    apps = AppMemories(engine, llm=None)
    assert apps.context(ACCOUNT, "notes") == ""
    sdk = Confide(engine, embedder=None)
    sdk.end_app_conversation("notes", "c1", transcript(1), account_id=ACCOUNT)
    assert apps.context(ACCOUNT, "notes").startswith("(memories for app: notes)\n")


def test_each_memory_200_and_the_whole_2000(engine: MemoryEngine) -> None:
    apps = AppMemories(engine, llm=None)
    apps.configure(ACCOUNT, "notes", memory_cap=40)
    for n in range(15):
        said = (
            f"Item {n:02d} is the report I prefer to read first. I always want the summary "
            "in bullet points. I want weekly updates on the budget. I prefer short answers."
        )
        long = [{"role": "user", "content": said}]
        asyncio.run(
            apps.end_conversation(
                account_id=ACCOUNT, app_id="notes", conversation_id=f"c{n}", messages=long
            )
        )
    text = apps.context(ACCOUNT, "notes")
    assert len(text) <= 2000
    lines = [line for line in text.splitlines() if line[:1].isdigit()]
    assert all(len(line.split("] ", 1)[1]) <= 200 for line in lines)
    assert 1 < len(lines) < 15
    # The newest are kept, numbered from 1.
    assert lines[0].split("] ", 1)[1].startswith("Item 14")
    assert [int(line.split(".", 1)[0]) for line in lines] == list(range(1, len(lines) + 1))
    assert text.endswith("\n\nUse these memories to provide context-aware responses.")
    assert render_context("notes", []) == ""
