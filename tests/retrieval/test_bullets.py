"""``memory_query`` bullets carry the key's words, so a bare value still says what it is; a
listing heads each memory with a label that is never empty."""

from __future__ import annotations

import pytest

from confide.engine import MemoryEngine
from confide.retrieval.memory_query import bullet, display_label, key_label


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


@pytest.mark.parametrize(
    ("key", "category", "memory_type", "label"),
    [
        ("daughter_name", None, "fact", "Daughter name"),
        ("likes.2", "preference", "preference", "Likes"),
        ("note.2", "fact", "fact", "Note"),
        ("insight.3", "insight", "fact", "Insight"),
        ("app_memory", None, "fact", "App memory"),
        ("conversation_summary.3-10", "conversation_chunk", "episodic", "Conversation summary"),
        ("subject_fact.other.d57bb208beaf", "subject_fact", "fact", "Subject fact: other"),
        ("k3", "follow_up", "procedural", "Follow up"),
        ("5f0c2a9be1d34c7a", None, "episodic", "Episodic"),
    ],
)
def test_display_label(key: str, category: str | None, memory_type: str, label: str) -> None:
    assert display_label(key, category=category, memory_type=memory_type) == label
