"""The SDK's ``add`` of a text is an operational event, with the similarity that made a
second add a duplicate."""

from __future__ import annotations

from confide.client import Confide
from confide.engine import MemoryEngine


def test_adding_a_text_records_a_create_then_a_duplicate_with_its_similarity(
    engine: MemoryEngine,
) -> None:
    sdk = Confide(engine, embedder=None)
    [stored] = sdk.add("Ann grows tomatoes on her balcony", user_id="ann", account_id="acct")
    [again] = sdk.add("Ann grows tomatoes on her balcony", user_id="ann", account_id="acct")
    assert (again.id, again.status) == (stored.id, "duplicate")
    events = engine.op_events(account_id="acct", node="sdk")
    assert [(e.op, e.status, e.memory_id) for e in events] == [
        ("create", "ok", stored.id),
        ("merge", "duplicate", stored.id),
    ]
    assert events[0].sim is None
    assert events[1].sim is not None and events[1].sim >= 0.92
