"""The writing rules on model-written app memories and compaction edits (both backends, the
scripted LLM over real HTTP): the semantic guard with the paragraph's own bounds trims or
refuses; a refused memory falls back to the offline paragraph, a refused edit to FIFO."""

from __future__ import annotations

import asyncio

from tests.apps.conftest import ACCOUNT, llm_of, transcript

from confide.apps import AppMemories
from confide.apps.scope import AppMessage
from confide.apps.service import EndOutcome, parse_messages
from confide.apps.writer import LLMMemoryWriter, check_app_memory, offline_paragraph
from confide.conversation.writing import Outcome
from confide.engine import MemoryEngine
from confide.testing.scripted_llm import ScriptedLLMServer

APP = "notes"


def _end(apps: AppMemories, n: int) -> EndOutcome:
    return asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT, app_id=APP, conversation_id=f"c{n}", messages=transcript(n)
        )
    )


def test_the_guard_keeps_a_paragraph_of_four_sentences_within_200_characters() -> None:
    four = (
        "The user prefers option 1. The deadline moved to Friday. The login bug was fixed. "
        "Tests are still open."
    )
    assert check_app_memory(four).outcome is Outcome.ACCEPTED
    five = four + " The user likes short answers."
    trimmed = check_app_memory(five)
    assert (trimmed.outcome, trimmed.text) == (Outcome.TRIMMED, four)
    long = "The user prefers option 1 for the quarterly report. " * 5
    cut = check_app_memory(long)
    assert cut.text is not None and len(cut.text) <= 200 and cut.text.endswith("report.")
    assert check_app_memory("x" * 150 + " is what the user typed " + "y" * 60).text is None


def test_a_first_person_memory_is_refused_and_the_offline_paragraph_written(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue("You prefer option 4 for the report.")
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = _end(apps, 4)
    assert outcome.memory is not None and outcome.written_by == "offline"
    assert outcome.memory.value == offline_paragraph(parse_messages(transcript(4)))
    assert isinstance(apps.writer, LLMMemoryWriter)
    tally = apps.writer.writing
    assert tally.counts[Outcome.REJECTED] == 1 and tally.reasons == {"not_third_person": 1}
    assert tally.first_pass_rate == 0.0


def test_a_decorated_memory_is_trimmed_and_counted(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue('"The user prefers option 5 for the report."')
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = _end(apps, 5)
    assert outcome.written_by == "llm" and outcome.memory is not None
    assert outcome.memory.value == "The user prefers option 5 for the report."
    llm_server.enqueue("The user prefers option 6 for the report.")
    _end(apps, 6)
    assert isinstance(apps.writer, LLMMemoryWriter)
    tally = apps.writer.writing
    assert (tally.counts[Outcome.TRIMMED], tally.counts[Outcome.ACCEPTED]) == (1, 1)
    assert tally.first_pass_rate == 0.5


def test_the_offline_paragraph_passes_the_guard_a_model_paragraph_must() -> None:
    said = [
        AppMessage(
            role="user",
            content="Can you export it as CSV? I always want dates in ISO format. Please hurry. "
            "You did great. We fixed the import bug; I still need to check the totals.",
        ),
        AppMessage(role="assistant", content="Sure."),
    ]
    paragraph = offline_paragraph(said)
    # The user's statements retold; the question, the request and the praise left out.
    assert paragraph == (
        "The user always wants dates in ISO format. The user and others fixed the import bug. "
        "The user still needs to check the totals."
    )
    assert check_app_memory(paragraph).outcome is Outcome.ACCEPTED
    alone = [AppMessage(role="assistant", content="I exported it. The export uses ISO dates.")]
    assert offline_paragraph(alone) == "The export uses ISO dates."  # speaks of neither party
    nothing = offline_paragraph([AppMessage(role="user", content="Thanks!")])
    assert check_app_memory(nothing).outcome is Outcome.ACCEPTED
