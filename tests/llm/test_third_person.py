"""The user's words retold in the third person: the rewriting every offline path uses."""

from __future__ import annotations

import pytest

from confide.conversation.writing import Outcome, check_semantic
from confide.llm.third_person import (
    about_user,
    as_memory,
    retell,
    second_person,
    strip_lead_in,
    third_person,
)


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("I live alone.", "The user lives alone."),
        ("i love my cat", "The user loves their cat"),
        ("I'm so tired.", "The user is so tired."),
        ("I've been feeling lonely since my husband passed.",
         "The user has been feeling lonely since their husband passed."),
        ("I don't like fish and I'd never been there.",
         "The user doesn't like fish and they had never been there."),
        ("I'd love to help.", "The user would love to help."),
        ("I really enjoy watching my grandkids play.",
         "The user really enjoys watching their grandkids play."),
        ("I carry my bag; I try hard.", "The user carries their bag; they try hard."),
        ("I was a nurse.", "The user was a nurse."),
        ("My back is killing me.", "The user's back is killing them."),
        ("Sarah is coming to see me on Sunday.", "Sarah is coming to see the user on Sunday."),
        ("We're snowed in; our road is closed.",
         "The user and others are snowed in; their road is closed."),
        ("My wife and I have lived in Reno for years.",
         "The user's wife and the user have lived in Reno for years."),
        ("What car do I drive?", "What car does the user drive?"),
        ("Can I go?", "Can the user go?"),
        ("I live here. I love it.", "The user lives here. The user loves it."),
        ("The weather was grey.", "The weather was grey."),
    ],
)  # fmt: skip
def test_first_person_becomes_the_user_and_the_verb_agrees(said: str, told: str) -> None:
    assert third_person(said) == told


def test_an_already_named_user_is_they_from_the_start() -> None:
    assert third_person("I am keen on counseling.", named=True) == "They are keen on counseling."
    assert third_person("my kids are excited", named=True) == "Their kids are excited"


@pytest.mark.parametrize(
    ("value", "clause", "told"),
    [
        ("lives alone", "I live alone.", "The user lives alone"),
        ("take my pills every morning", "I take my pills every morning.",
         "The user takes their pills every morning"),
        ("snowed in", "We're snowed in today.", "The user and others are snowed in today"),
        ("arthritis in my hands", "I have arthritis in my hands.",
         "The user has arthritis in their hands"),
        ("back is killing me", "My back is killing me.", "The user's back is killing them"),
        ("being a grandmother", "I love being a grandmother.",
         "The user loves being a grandmother"),
        ("uses a wheelchair", "I'm in a wheelchair.", "The user uses a wheelchair"),
        ("Margaret", "I'm Margaret.", "Margaret"),
        ("2 daughters", "I have two daughters.", "2 daughters"),
    ],
)  # fmt: skip
def test_a_rule_value_gets_the_user_as_its_subject(value: str, clause: str, told: str) -> None:
    assert about_user(value, clause) == told
    assert check_semantic(told, keyed=True).outcome is Outcome.ACCEPTED


def test_a_value_that_addresses_someone_or_ends_mid_sentence_is_none() -> None:
    assert about_user("how you paint", "I love how you paint.") is None
    assert about_user("to", "I love to.") is None


def test_as_memory_mends_what_an_agent_wrote() -> None:
    assert as_memory("uses a walker") == "The user uses a walker"
    assert as_memory("Loves gardening.") == "The user loves gardening."
    assert as_memory("My daughter Sarah lives in Denver.") == (
        "The user's daughter Sarah lives in Denver."
    )
    assert as_memory("Tucson") == "Tucson"


@pytest.mark.parametrize(
    ("sentence", "told"),
    [
        ("Oh, so I went to the market yesterday!", "The user went to the market yesterday."),
        ("Thanks, Mel! I'm keen on counseling.", "The user is keen on counseling."),
        ("Yeah, I want metric units, please.", "The user wants metric units."),
        ("By the way, take a look at this.", None),  # an order
        ("Please speak slowly.", None),
        ("I love how you paint.", None),  # words to someone
        ("It was so powerful.", None),  # points back at what came before
        ("Gonna continue my studies.", None),  # no subject
        ("Great weather today.", "Great weather today."),
    ],
)
def test_retell_keeps_statements_and_drops_the_rest(sentence: str, told: str | None) -> None:
    assert retell(sentence) == told


def test_lead_ins_and_fillers_go() -> None:
    assert strip_lead_in("Wow, Melanie!") == ""
    assert strip_lead_in("You know, I love it, you know.") == "I love it."
    assert strip_lead_in("No one came.") == "No one came."
    assert second_person("Glad it helped ya") and not second_person("The user is glad")
