"""The offline extractor's behaviour beyond the tool examples."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from hypothesis import given
from hypothesis import strategies as st

from confide.conversation.writing import Outcome, check_semantic
from confide.llm.candidates import Candidate
from confide.llm.key_vocabulary import is_vocabulary, to_vocabulary
from confide.llm.offline import OfflineExtractor, split_clauses
from confide.types import MemoryType


@dataclass(frozen=True)
class T:
    speaker: Literal["user", "assistant"]
    summary: str


def keys(text: str) -> dict[str, str]:
    return {c.key: c.value for c in OfflineExtractor().extract_text(text)}


def test_reads_only_user_turns_and_honours_skip_keys() -> None:
    turns = [
        T("assistant", "Your dog Rex must be happy."),
        T("user", "My dog Biscuit is. I live in Portland."),
    ]
    found = asyncio.run(OfflineExtractor().extract(turns, skip_keys={"CITY"}))
    assert {c.key: c.value for c in found} == {"pet_dog_name": "Biscuit"}


def test_counts_names_and_compound_clauses() -> None:
    assert keys("I have two daughters and a son.") == {
        "daughters_count": "2 daughters",
        "sons_count": "1 son",
    }
    assert keys("My name is Margaret, but everyone calls me Peggy.") == {
        "name": "Margaret",
        "preferred_name": "Peggy",
    }


def test_types_are_assigned() -> None:
    found = {c.key: c.type for c in OfflineExtractor().extract_text(
        "I'm so tired. I grew up in Boston. My cardiologist appointment is on March 3rd."
    )}  # fmt: skip
    assert found == {
        "mood": MemoryType.WELLBEING,
        "hometown": MemoryType.HISTORY,
        "appointment": MemoryType.FOLLOW_UP,
    }


def test_small_talk_gives_nothing() -> None:
    for text in ("What's the weather like today?", "Thanks, that's very helpful.", "Okay, bye!"):
        assert keys(text) == {}


def test_split_clauses() -> None:
    assert split_clauses("I live alone. My son visits, but I miss him and I'm sad") == [
        "I live alone.",
        "My son visits",
        "I miss him",
        "I'm sad",
    ]


@given(st.text(max_size=300))
def test_never_raises_and_keys_are_snake_case(text: str) -> None:
    for candidate in OfflineExtractor().extract_text(text):
        assert candidate.key and candidate.key == candidate.key.lower()
        assert candidate.value.strip()


def test_names_and_family_phrasings() -> None:
    assert keys("I go by Liz these days.") == {"preferred_name": "Liz"}
    assert keys("Hi, it's Eleanor here.") == {"name": "Eleanor"}
    assert keys("It's Tuesday today.") == {}
    assert keys("My oldest boy, Richard, is a lawyer.")["son_name"] == "Richard"
    assert keys("I've got four grandkids.") == {"grandchildren_count": "4 grandkids"}
    assert keys("Our cat is named Pepper.") == {"pet_cat_name": "Pepper"}
    assert keys("We have an old golden retriever, Duke.") == {"pet_dog_name": "Duke"}
    lost = keys("I lost my husband, Bill, two years ago.")
    assert lost["husband_passed_away"] == "husband Bill passed away two years ago"


def test_we_contractions_and_adverbs() -> None:
    assert keys("My wife and I have lived in Reno for years.") == {"city": "Reno"}
    assert keys("We really love dancing.") == {"likes": "dancing"}
    assert keys("I'd much rather have tea than coffee.") == {"prefers": "tea over coffee"}
    assert keys("I just can't stomach fish.") == {"dislikes": "fish"}
    assert keys("I'm still working part time as a bookkeeper.") == {"occupation": "bookkeeper"}


def test_home_mobility_and_visits() -> None:
    assert keys("It's just me and the dog in this big house.") == {
        "living_situation": "The user lives alone with the dog"
    }
    assert keys("My son lives with me now.") == {"living_situation": "The user lives with son"}
    assert keys("I gave up my license last year.")["mobility"].startswith(
        "The user gave up their license"
    )
    assert keys("The kids are all coming home for Thanksgiving.") == {
        "visit": "children: The kids are all coming home for Thanksgiving"
    }
    assert keys("I'm getting my cataract surgery on the 14th.") == {
        "appointment": "The user's cataract surgery on the 14th"
    }
    assert keys("My son is coming over.") == {}  # a visit needs a time word


def test_negated_moods_keep_the_negation() -> None:
    assert keys("I'm not feeling great today.") == {"mood": "The user does not feel great today"}
    assert keys("I don't live in Portland anymore.") == {}


def test_questions_hypotheticals_and_reported_speech_give_nothing() -> None:
    for text in (
        "Do you have any kids?",
        "Is my daughter coming tomorrow?",
        "If I had a dog I would call him Rex.",
        "I wonder if I should move to Florida.",
        "My friend told me that she hates the cold.",
        "Tom said he is coming tomorrow.",
        "I'd like to visit Rome someday.",
    ):
        assert keys(text) == {}, text
    assert keys("Could you talk a little louder?") == {"communication_style": "speak louder"}


def test_keys_come_from_the_fixed_vocabulary_never_from_the_words() -> None:
    # Before, these keys were built from the user's words (dislikes_ex_husband_robert...).
    assert keys("I can't stand my ex-husband Robert.") == {
        "dislikes": "The user's ex-husband Robert"
    }
    assert keys("I like cocaine and I like gardening.") == {
        "likes": "cocaine",
        "likes.2": "gardening",
    }
    assert keys("I prefer methadone over morphine.") == {"prefers": "methadone over morphine"}
    assert keys("My lower back has been hurting.") == {
        "pain": "The user's lower back has been hurting"
    }
    assert keys("My favorite dance move is the twist.") == {"favorite": "dance move: the twist"}
    assert keys("My favorite color is blue.") == {"favorite_color": "blue"}
    for text in (
        "I can't stand my ex-husband Robert.",
        "I like cocaine and I like gardening.",
        "My lower back has been hurting.",
    ):
        for candidate in OfflineExtractor().extract_text(text):
            assert is_vocabulary(candidate.key), candidate.key


def test_family_keys_are_numbered_past_stored_ones() -> None:
    found = asyncio.run(
        OfflineExtractor().extract(
            [T("user", "I hate loud music. I live in Reno.")],
            skip_keys={"dislikes", "DISLIKES.2", "city"},
        )
    )
    assert {c.key: c.value for c in found} == {"dislikes.3": "loud music"}


def test_model_keys_outside_the_vocabulary_are_mapped() -> None:
    def mapped(key: str, value: str = "v", taken: tuple[str, ...] = ()) -> tuple[str, str]:
        out = to_vocabulary(Candidate(type=MemoryType.FACT, key=key, value=value), taken)
        return out.key, out.value

    assert mapped("dislikes_ex_husband_robert", "my ex-husband Robert") == (
        "dislikes",
        "my ex-husband Robert",
    )
    assert mapped("likes_gardening", "gardening", ("likes",)) == ("likes.2", "gardening")
    assert mapped("allergy_penicillin", "penicillin") == ("allergy", "penicillin")
    assert mapped("daughter_name", "Sue") == ("daughter_name", "Sue")
    assert mapped("secret_lover_bob", "Bob") == ("note", "secret lover bob: Bob")
    assert mapped("city", "Reno", ("city",)) == ("city", "Reno")


def test_values_are_written_about_the_user_as_the_writing_rules_ask() -> None:
    assert keys("I live on my own.") == {"living_situation": "The user lives on their own"}
    assert keys("I take my vitamins every night.") == {
        "routine": "The user takes their vitamins every night"
    }
    assert keys("My knee hurts when it rains.") == {"pain": "The user's knee hurts"}
    assert keys("I love being a grandmother.") == {"likes": "The user loves being a grandmother"}
    # Names, places and counts stay as said; a value addressing someone is not extracted.
    assert keys("I hate my neighbour Gary.")["neighbor_name"] == "Gary"
    assert keys("I love how you paint.") == {}
    assert keys("I love to.") == {}
    for text in ("I use a hearing aid.", "My granddaughter is visiting next week."):
        for candidate in OfflineExtractor().extract_text(text):
            verdict = check_semantic(candidate.value, keyed=True)
            assert verdict.outcome is Outcome.ACCEPTED, candidate.value
