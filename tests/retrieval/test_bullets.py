"""``memory_query`` bullets carry the key's words, so a bare value still says what it is."""

from __future__ import annotations

import pytest

from confide.engine import MemoryEngine
from confide.retrieval.memory_query import bullet, key_label


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("daughter_name", "daughter name"),
        ("pet.dog_name", "pet dog name"),
        ("likes.2", "likes"),
        ("favourite-film", "favourite film"),
        ("top5_movies", "top5 movies"),
        ("note", None),
        ("note.2", None),
        ("insight.3", None),
        ("app_memory", None),
        ("conversation_summary.3-10", None),
        ("subject_fact.health.0a1b2c3d4e5f", None),
        ("k3", None),
        ("5f0c2a9be1d34c7a", None),
    ],
)
def test_key_label(key: str, label: str | None) -> None:
    assert key_label(key) == label


def test_a_bullet_names_its_key(engine: MemoryEngine) -> None:
    owner = {"account_id": "a", "user_id": "u"}
    maya = engine.store({**owner, "key": "daughter_name", "value": "Maya"})
    note = engine.store({**owner, "key": "note.2", "value": "Ali has a dog named Biscuit."})
    assert bullet(maya) == {"id": maya.id, "category": "fact", "text": "[fact] daughter name: Maya"}
    assert bullet(note)["text"] == "[fact] Ali has a dog named Biscuit."
