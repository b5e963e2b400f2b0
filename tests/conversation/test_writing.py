"""The writing rules: what the semantic and episodic guards accept, trim and reject."""

from __future__ import annotations

import json

import pytest

from confide.client import Confide
from confide.config import Settings
from confide.conversation.extraction import LLMExtractor
from confide.conversation.writing import (
    Outcome,
    WritingTally,
    check_episodic,
    check_semantic,
)
from confide.engine import MemoryEngine
from confide.testing.scripted_llm import ScriptedLLMServer


@pytest.mark.parametrize(
    "text",
    [
        "The user seems to value a quiet routine in the mornings.",
        "Ann grows roses in her garden",
        "Ann's son is called Tom.",
        "Ann talked about her garden. She grows roses.",
    ],
)
def test_semantic_accepts_complete_third_person_memories_unchanged(text: str) -> None:
    verdict = check_semantic(text)
    assert verdict.outcome is Outcome.ACCEPTED and verdict.text == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I love gardening.", "not_third_person"),
        ("The user told you about your garden.", "not_third_person"),
        ("She grows roses.", "not_self_contained"),
        ("This matters a lot to the user.", "not_self_contained"),
        ("Gardening on weekends", "incomplete"),
        ("The user lives in", "incomplete"),
        ("Loves gardening on weekends.", "no_subject"),
        ("   ", "empty"),
        ("The user " + "really " * 60 + "likes tea.", "too_long"),
    ],
)
def test_semantic_rejects(text: str, reason: str) -> None:
    verdict = check_semantic(text)
    assert verdict.outcome is Outcome.REJECTED and verdict.text is None
    assert verdict.reason == reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"The user has two cats."', "The user has two cats."),
        ("- Insight: The user values quiet mornings.", "The user values quiet mornings."),
        ("1. The user  walks\n daily.", "The user walks daily."),
        (
            "The user likes tea. The user walks daily. The user reads novels.",
            "The user likes tea. The user walks daily.",
        ),
        (
            "The user likes tea. The user " + "also " * 60 + "walks.",
            "The user likes tea.",
        ),
    ],
)
def test_semantic_trims_decoration_and_extra_sentences(text: str, expected: str) -> None:
    verdict = check_semantic(text)
    assert verdict.outcome is Outcome.TRIMMED and verdict.text == expected


def test_a_keyed_fragment_is_complete_with_its_key_but_a_sentence_must_be_one() -> None:
    assert check_semantic("Tucson", keyed=True).outcome is Outcome.ACCEPTED
    assert check_semantic("Tucson").outcome is Outcome.REJECTED
    assert check_semantic("my daughter", keyed=True).reason == "not_third_person"
    assert check_semantic("Loves tea every morning.", keyed=True).reason == "no_subject"


@pytest.mark.parametrize(
    "text",
    [
        "Ann talked about her garden and decided to plant roses.",
        "The user asked for hotel tips. The trip is in May.",
        "The user and the assistant went through the budget.",
    ],
)
def test_episodic_accepts_what_was_discussed_decided_or_done(text: str) -> None:
    assert check_episodic(text).outcome is Outcome.ACCEPTED


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The user talks about work.", "not_past_tense"),
        ("More about the garden.", "not_past_tense"),
        ("We discussed the plan.", "not_third_person"),
        ("They counted lines.", "not_self_contained"),
    ],
)
def test_episodic_rejects(text: str, reason: str) -> None:
    assert check_episodic(text).reason == reason


def test_the_tally_counts_the_first_pass_rate() -> None:
    tally = WritingTally()
    assert tally.first_pass_rate is None
    tally.add(check_semantic("The user likes tea."))
    tally.add(check_semantic('"The user likes coffee."'))
    tally.add(check_semantic("I like tea."))
    tally.add(check_semantic("The user walks daily."))
    assert tally.counts == {Outcome.ACCEPTED: 2, Outcome.TRIMMED: 1, Outcome.REJECTED: 1}
    assert tally.first_pass_rate == 0.5
    assert tally.reasons == {"decorated": 1, "not_third_person": 1}
    other = WritingTally()
    other.merge(tally)
    assert other.total == 4 and other.first_pass_rate == 0.5


def test_a_pronoun_set_or_a_quote_is_mentioned_not_used() -> None:
    assert check_semantic("they/them", keyed=True).outcome is Outcome.ACCEPTED
    assert check_semantic("The user uses she/her pronouns.").outcome is Outcome.ACCEPTED
    said = 'The user\'s motto is "I can do it".'
    assert check_semantic(said).outcome is Outcome.ACCEPTED


def test_the_sdk_sends_a_models_candidates_through_the_rules(
    engine: MemoryEngine, settings: Settings
) -> None:
    answer = json.dumps(
        [
            {"type": "fact", "key": "pet_dog_name", "value": "Rex"},
            {"type": "fact", "key": "mood", "value": "I feel happy about Rex."},
            {"type": "fact", "key": "note", "value": '"The user walks Rex every day."'},
        ]
    )
    with ScriptedLLMServer([answer]) as server:
        configured = settings.model_copy(
            update={"llm_base_url": server.base_url, "llm_model": "scripted"}
        )
        sdk = Confide(engine, embedder=None, settings=configured)
        said = "My dog is called Rex. I feel happy about Rex. I walk Rex every day."
        stored = sdk.add([{"role": "user", "content": said}], user_id="u1", account_id="acct")
    assert sorted(m.value for m in stored) == ["Rex", "The user walks Rex every day."]
    assert isinstance(sdk.extractor, LLMExtractor)
    assert sdk.extractor.writing.counts == {
        Outcome.ACCEPTED: 1,
        Outcome.TRIMMED: 1,
        Outcome.REJECTED: 1,
    }


def test_plural_nouns_are_not_taken_for_verbs() -> None:
    assert check_semantic("The user's many hobbies and interests").reason == "incomplete"
    assert check_semantic("The user walks and reads daily.").outcome is Outcome.ACCEPTED


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Does the user like tea?", "question"),
        ("The user has a dog. Is it called Rex?", "question"),
        ("Remind the user to take their pills.", "instruction"),
        ("Please speak slowly with the user.", "instruction"),
        ("Never mention the user's late husband.", "instruction"),
        ("Don't call the user after 8pm.", "instruction"),
    ],
)
def test_a_question_or_an_instruction_is_no_memory(text: str, reason: str) -> None:
    assert check_semantic(text).reason == reason
    assert check_semantic(text, keyed=True).reason == reason
    assert check_episodic(text).reason == reason


def test_a_statement_about_what_the_user_asked_is_one() -> None:
    assert check_semantic("The user asked about the bus times.").outcome is Outcome.ACCEPTED
    assert check_semantic("The user never drinks coffee.").outcome is Outcome.ACCEPTED
