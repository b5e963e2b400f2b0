"""Write-time de-duplication: near twins merge, facts that differ in what makes them facts do
not, however similar they read or mean (the real local embedder decides the cosine)."""

from __future__ import annotations

import pytest

from confide.client import Confide
from confide.conversation.dedup import DedupPolicy, distinct_facts
from confide.embedders.local import LocalMiniLMEmbedder
from confide.engine import MemoryEngine
from confide.types import MemoryType

DISTINCT = [
    ("Meeting with Sam on Monday", "Meeting with Sam on Tuesday"),
    ("Timing note number 0 about tea", "Timing note number 1 about tea"),
    ("Has two cats", "Has three cats"),
    ("Dentist appointment on 3 March", "Dentist appointment on 4 March"),
    ("Birthday is in June", "Birthday is in July"),
    ("Lunch with Sam", "Lunch with Alex"),
    ("Sam likes jazz", "Alex likes jazz"),
    ("Likes green tea", "Doesn't like green tea"),
    ("Is vegetarian", "Is not vegetarian"),
    ("I never drink coffee", "I drink coffee"),
]
SAME = [
    ("Ali has a dog named Biscuit.", "ali has a dog named Biscuit"),
    ("Loves green tea.", "loves green tea"),
    ("Meeting with Sam on Monday", "meeting with Sam on monday!"),
    ("Doesn't like green tea", "doesn’t like green tea"),
]


@pytest.mark.parametrize(("a", "b"), DISTINCT)
def test_facts_that_differ_in_a_marker_are_distinct(a: str, b: str) -> None:
    assert distinct_facts(a, b) and distinct_facts(b, a)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_spelling_case_and_punctuation_do_not_make_facts_distinct(a: str, b: str) -> None:
    assert not distinct_facts(a, b) and not distinct_facts(b, a)


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


@pytest.mark.slow
@pytest.mark.parametrize(("old", "new"), DISTINCT)
def test_no_write_path_merges_a_distinct_fact(
    engine: MemoryEngine, minilm: LocalMiniLMEmbedder, old: str, new: str
) -> None:
    stored = engine.store(
        {"account_id": "a", "user_id": "u", "key": "note", "value": old, "type": "fact"}
    )
    # Thresholds a near twin would pass: only the rule keeps the facts apart.
    policy = DedupPolicy(text_threshold=0.5, cosine_threshold=0.5, embedder=minilm)
    twin = policy.duplicate_of(
        key="note.2", value=new, memory_type=MemoryType.FACT, existing=[stored]
    )
    assert twin is None


def test_a_near_twin_is_still_a_duplicate(engine: MemoryEngine) -> None:
    stored = engine.store(
        {"account_id": "a", "user_id": "u", "key": "note", "value": "Ali has a dog named Biscuit."}
    )
    twin = DedupPolicy().duplicate_of(
        key="note.2", value="ali has a dog named biscuit", memory_type=MemoryType.FACT,
        existing=[stored],
    )  # fmt: skip
    assert twin is not None and twin.memory.id == stored.id


@pytest.mark.slow
def test_add_with_the_local_embedder_keeps_both_and_says_what_it_matched(
    engine: MemoryEngine, minilm: LocalMiniLMEmbedder
) -> None:
    with Confide(engine, embedder=minilm) as sdk:
        for one, other in DISTINCT[:2]:
            [a] = sdk.add(one, user_id="u")
            [b] = sdk.add(other, user_id="u")
            assert (a.status, b.status) == ("created", "created")
        [again] = sdk.add("meeting with Sam on monday!", user_id="u")
        assert again.status == "duplicate" and again.value == "Meeting with Sam on Monday"
