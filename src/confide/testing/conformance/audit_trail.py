"""Conformance: relation edges in the audit trail, a user's audit events in their export, and
operational events read back with their similarity.

Every relation edge a write creates is audited as a ``LINK`` event of the memory written
(ids, relation, strength; never a value) and counted as a ``link`` operational event whose
``sim`` is the similarity that decided it; the consolidation worker's links are audited the
same way. The real local MiniLM embedder makes the edges: which memories are related is
the point here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from confide.client import Confide
from confide.embedders import Embedder, build_embedder
from confide.engine import MemoryEngine
from confide.testing.conformance.harness import StorageHarness
from confide.types import HistoryEvent, HistoryEventType, MemoryFilter
from confide.workers.consolidation import ACTOR, RELATED, Consolidator
from confide.workers.judges import OfflineJudge

ACCOUNT = "acct-trail"
USER = "ana"
# The date every memory's indexed text carries, so similarities never depend on today's.
OCCURRED = "2026-03-04T10:00:00+00:00"
DOG = "We adopted a beagle puppy named Rex last spring."
WALKS = "I walk our beagle Rex in the park every morning."
TAX = "Quarterly tax forms are due at the end of the month."
NEAR_MISSES = (
    "Walks 2 miles in the park every morning",
    "Walks 3 miles in the park every morning",
    "Has a sister named Ana who lives in Lisbon",
    "Has a cousin named Ana who lives in Lisbon",
)


def _new(key: str, value: str, **fields: Any) -> dict[str, Any]:
    return {
        "account_id": ACCOUNT,
        "user_id": USER,
        "key": key,
        "value": value,
        "metadata": {"occurred_at": OCCURRED},
        **fields,
    }


def _links(engine: MemoryEngine, memory_id: str) -> list[HistoryEvent]:
    return [
        h for h in engine.history(memory_id, account_id=ACCOUNT) if h.event == HistoryEventType.LINK
    ]


def _edges_from(engine: MemoryEngine, memory_id: str) -> dict[str, tuple[str, float]]:
    """The relation edges touching ``memory_id``: the other end -> (relation, strength)."""
    return {
        (e.to_id if e.from_id == memory_id else e.from_id): (e.relation_type, e.strength)
        for e in engine.search_index.edges(ACCOUNT, [memory_id])
    }


class AuditTrailConformance(StorageHarness):
    """``LINK`` audit events, the audit events of an export, and operational events read
    back (``MemoryEngine.op_events``) on this backend."""

    @pytest.fixture(scope="class")
    @classmethod
    def minilm(cls, tmp_path_factory: pytest.TempPathFactory) -> Embedder:
        """The real local MiniLM embedder, loaded once per class."""
        embedder = build_embedder("local:all-MiniLM-L6-v2", home=tmp_path_factory.mktemp("home"))
        assert embedder is not None
        embedder.embed_one("load")
        return embedder

    @pytest.fixture
    def linking(self, engine: MemoryEngine, minilm: Embedder) -> Iterator[Confide]:
        """A client over ``engine`` whose writes link each memory to its neighbours."""
        settings = engine.settings.model_copy(update={"link_top_k": 5, "link_min": 0.4})
        app = Confide(engine, embedder=minilm, settings=settings)
        try:
            yield app
        finally:
            app.access.close()

    def test_operational_events_read_back_with_their_similarity(self, engine: MemoryEngine) -> None:
        engine.emit_op(
            "hotpath",
            "merge",
            account_id=ACCOUNT,
            user_id=USER,
            status="duplicate",
            memory_id="m1",
            category="fact",
            sim=0.9731,
        )
        engine.emit_op("hotpath", "search", account_id=ACCOUNT, user_id=USER, status="empty")
        engine.emit_op("worker", "link", account_id="acct-other", memory_id="m9", sim=0.5)
        events = engine.op_events(account_id=ACCOUNT)
        assert [
            (e.user_id, e.node, e.op, e.status, e.memory_id, e.category, e.sim) for e in events
        ] == [
            (USER, "hotpath", "merge", "duplicate", "m1", "fact", 0.9731),
            (USER, "hotpath", "search", "empty", None, None, None),
        ]
        assert all(e.ts is not None for e in events)
        assert [e.op for e in engine.op_events(account_id=ACCOUNT, op="search")] == ["search"]
        assert engine.op_events(account_id=ACCOUNT, node="worker") == []
        assert [e.op for e in engine.op_events(account_id=ACCOUNT, limit=1)] == ["merge"]
        assert [e.sim for e in engine.op_events(account_id="acct-other")] == [0.5]
        assert engine.op_events(account_id=ACCOUNT, since=time.time() + 60) == []

    @pytest.mark.slow
    def test_every_relation_edge_a_write_creates_is_audited_as_link(self, linking: Confide) -> None:
        engine = linking.engine
        dog = engine.store(_new("dog", DOG), actor="agent")
        tax = engine.store(_new("tax", TAX), actor="agent")
        walks = engine.store(_new("walks", WALKS), actor="agent")
        edges = _edges_from(engine, walks.id)
        assert edges.get(dog.id, ("", 0.0))[0] == RELATED  # the beagle memories are related
        assert tax.id not in edges
        links = _links(engine, walks.id)
        assert {h.meta["related_id"]: (h.meta["relation"], h.meta["strength"]) for h in links} == (
            edges
        )
        assert all(h.actor == "agent" and h.memory_id == walks.id for h in links)
        assert engine.history(walks.id, account_id=ACCOUNT)[-1].event == HistoryEventType.ADD
        # Ids, relations and strengths only: no value, no key in any LINK event.
        shown = json.dumps([h.model_dump(mode="json") for h in links])
        assert "beagle" not in shown and "walks" not in shown
        # Each link counted once, its similarity as ``sim``.
        counted = engine.op_events(account_id=ACCOUNT, op="link")
        assert sorted((e.memory_id, e.node, e.status, e.sim) for e in counted) == sorted(
            (m, "index", RELATED, strength)
            for m in (dog.id, tax.id, walks.id)
            for relation, strength in _edges_from_only(engine, m).values()
            if relation == RELATED
        )
        assert any(e.memory_id == walks.id and e.sim == edges[dog.id][1] for e in counted)

    @pytest.mark.slow
    def test_turns_of_one_run_are_linked_as_adjacent(self, linking: Confide) -> None:
        engine = linking.engine
        first, second = engine.store_many(
            [
                _new("turn", "Shall we book the dentist for Tuesday?", run_id="call-1"),
                _new("answer", "Yes, Tuesday at ten works.", run_id="call-1"),
            ],
            actor="extraction",
        )
        adjacent = [h for h in _links(engine, second.id) if h.meta["relation"] == "adjacent"]
        assert [(h.actor, h.meta["related_id"], h.meta["strength"]) for h in adjacent] == [
            ("extraction", first.id, 1.0)
        ]
        counted = engine.op_events(account_id=ACCOUNT, op="link")
        assert ("adjacent", None) in {
            (e.status, e.sim) for e in counted if e.memory_id == second.id
        }

    @pytest.mark.slow
    def test_a_failed_write_leaves_no_link(self, linking: Confide) -> None:
        engine = linking.engine
        dog = engine.store(_new("dog", DOG))

        def fail(*_: object) -> None:
            raise RuntimeError("the batch's other work failed")

        with pytest.raises(RuntimeError):
            engine.commit_batch(new=[_new("walks", WALKS)], within=fail)
        assert _links(engine, dog.id) == []
        assert engine.op_events(account_id=ACCOUNT, op="link") == []

    @pytest.mark.slow
    def test_links_made_by_consolidation_are_audited(
        self, engine: MemoryEngine, minilm: Embedder
    ) -> None:
        # No store-time links: every edge here is the worker's.
        settings = engine.settings.model_copy(update={"link_top_k": 0})
        app = Confide(engine, embedder=minilm, settings=settings)
        try:
            stored = engine.store_many([_new("note", v) for v in NEAR_MISSES])
            worker = Consolidator(
                engine,
                OfflineJudge(same_cosine=0.99),
                engine.settings.model_copy(update={"consolidation_cosine_min": 0.3}),
            )
            report = asyncio.run(worker.run_user(account_id=ACCOUNT, user_id=USER))
        finally:
            app.access.close()
        assert report.links >= 1
        edges = engine.search_index.edges(ACCOUNT, [m.id for m in stored])
        related = [e for e in edges if e.relation_type == RELATED]
        assert len(related) == report.links
        for edge in related:
            [event] = [
                h for h in _links(engine, edge.from_id) if h.meta["related_id"] == edge.to_id
            ]
            assert event.actor == ACTOR
            assert event.meta == {
                "related_id": edge.to_id,
                "relation": RELATED,
                "strength": edge.strength,
            }
        counted = engine.op_events(account_id=ACCOUNT, node="worker", op="link")
        sims = sorted(e.sim or 0.0 for e in counted)
        assert sims == sorted(e.strength for e in related)
        # A second run links nothing new (the pairs were judged): no second LINK event.
        asyncio.run(worker.run_user(account_id=ACCOUNT, user_id=USER))
        assert sum(len(_links(engine, m.id)) for m in stored) == report.links

    @pytest.mark.slow
    def test_an_export_carries_the_users_audit_events(
        self, linking: Confide, tmp_path: Path
    ) -> None:
        engine = linking.engine
        dog = engine.store(_new("dog", DOG), actor="agent")
        walks = engine.store(_new("walks", WALKS), actor="agent")
        renamed = engine.update(
            walks.id, {"value": WALKS.replace("Rex", "Max")}, account_id=ACCOUNT
        )
        engine.forget(dog.id, account_id=ACCOUNT, actor="agent")
        other = engine.store(_new("pin", "Her PIN hint is the cat's name.", user_id="ben"))
        document = engine.export_user(account_id=ACCOUNT, user_id=USER)
        assert document["format"] == "confide.export/1"
        audit = document["audit"]
        # Every event of every version, oldest first, exactly as ``history`` shows them.
        expected = sorted(
            (
                h.model_dump(mode="json")
                for m in (dog, walks)
                for h in engine.history(m.id, account_id=ACCOUNT)
            ),
            key=lambda e: e["id"],
        )
        assert audit == expected
        events = [(e["event"], e["memory_id"]) for e in audit]
        assert events[0] == ("ADD", dog.id)
        assert ("LINK", walks.id) in events and ("UPDATE", renamed.id) in events
        assert events[-1] == ("DELETE", dog.id)
        assert all(e["memory_id"] != other.id for e in audit)
        update = next(e for e in audit if e["event"] == "UPDATE")
        assert update["meta"] == {"key": "walks", "fields": ["value"]}
        # Never a value: the export's memories carry them, its audit events do not.
        shown = json.dumps(audit)
        assert all(word not in shown for word in ("beagle", "Max", "Rex", "PIN"))
        # Importing it (into another user here) accepts the events and does not replay them:
        # the copy's history is its own import.
        report = engine.import_user(document, user_id="copy")
        assert report.imported == 3
        copies = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="copy"))
        assert copies
        for copy in copies:
            history = engine.history(copy.id, account_id=ACCOUNT)
            assert {h.actor for h in history} == {"import"}
        (tmp_path / "export.json").write_text(json.dumps(document), encoding="utf-8")
        again = json.loads((tmp_path / "export.json").read_text(encoding="utf-8"))
        assert engine.import_user(again, user_id="copy").skipped == 3


def _edges_from_only(engine: MemoryEngine, memory_id: str) -> dict[str, tuple[str, float]]:
    """The edges ``memory_id``'s own write made (it is their ``from`` end, or the later of
    an adjacency pair): the other end -> (relation, strength)."""
    return {
        e.to_id: (e.relation_type, e.strength)
        for e in engine.search_index.edges(ACCOUNT, [memory_id])
        if e.from_id == memory_id
    }
