"""The offline extractor's behaviour beyond the tool examples."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from engram.llm.offline import OfflineExtractor, split_clauses
from engram.types import MemoryType


@dataclass(frozen=True)
class T:
    speaker: str
    summary: str


def keys(text: str) -> dict[str, str]:
    return {c.key: c.value for c in OfflineExtractor().extract_text(text)}


def test_reads_only_user_turns_and_honours_skip_keys() -> None:
    turns = [
        T("assistant", "Your dog Rex must be happy."),
        T("user", "My dog Biscuit is. I live in Portland."),
    ]
    found = asyncio.run(OfflineExtractor().extract(turns, skip_keys={"CITY"}))  # type: ignore[arg-type]
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
        "appointment_cardiologist": MemoryType.FOLLOW_UP,
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
