"""Conformance: the daily consolidation job on each backend.

Same-fact memories become one new version with links to its sources, the merged-away
memory leaves retrieval but stays restorable and audited, judged pairs are not judged again
for the recheck period, the daily cap holds, candidates are what the job promises, a failed
model leaves the data as it was, erasure removes the job's rows, and an older store
upgrades. The deterministic hashing embedder is enough here (which pairs are one fact is the
judge's business, measured by ``bench/consolidation.py``); the LLM judge talks to the
scripted server over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import ProviderError
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.llm.usage import MeteredLLM, UsageLedger
from confide.storage.apps import SqlAppTables
from confide.storage.base import Capability, Storage
from confide.storage.consolidation import SqlConsolidationTables
from confide.testing.builders import ACCOUNT as OWN_ACCOUNT
from confide.testing.builders import add
from confide.testing.conformance.confined import OTHER, ConfinedRoleHarness
from confide.testing.conformance.harness import latest_versions, unrecord_steps
from confide.testing.embedders import HashingEmbedder
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply
from confide.types import HistoryEventType, Memory, MemoryFilter, MemoryState, utcnow
from confide.workers.consolidation import MERGED_FROM, ConsolidationReport, Consolidator
from confide.workers.judges import LLMJudge, OfflineJudge, SameFactJudge

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage

ACCOUNT = "acct-consolidation"
USER = "ana"
THREAD = f"{ACCOUNT}/{USER}"

# Hashing-embedder twins (the same words) and facts set apart by a number or a relation.
TWINS = ("Walks the dog in the park every morning", "Every morning walks the dog in the park")
NEAR_MISSES = (
    "Walks 2 miles in the park every morning",
    "Walks 3 miles in the park every morning",
    "Has a sister named Ana who lives in Lisbon",
    "Has a cousin named Ana who lives in Lisbon",
)


def _new(value: str, key: str = "note", **fields: Any) -> dict[str, Any]:
    return {"account_id": ACCOUNT, "user_id": USER, "key": key, "value": value, **fields}


def _run(consolidator: Consolidator, **kw: Any) -> ConsolidationReport:
    return asyncio.run(consolidator.run_user(account_id=ACCOUNT, user_id=USER, **kw))


def _active(engine: MemoryEngine) -> list[Memory]:
    return engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id=USER))


class ConsolidationConformance(ConfinedRoleHarness):
    """The consolidation job (``confide.workers.consolidation``) on this backend."""

    @pytest.fixture
    def indexed(self, engine: MemoryEngine) -> Iterator[MemoryEngine]:
        """``engine`` with the hashing embedder's vector index (no related edges)."""
        settings = engine.settings.model_copy(update={"link_top_k": 0})
        app = Confide(engine, embedder=HashingEmbedder(dims=256), settings=settings)
        try:
            yield engine
        finally:
            app.access.close()

    def _consolidator(
        self, engine: MemoryEngine, judge: SameFactJudge | None = None, **changes: Any
    ) -> Consolidator:
        settings = engine.settings.model_copy(update=changes)
        return Consolidator(engine, judge or OfflineJudge(same_cosine=0.9), settings)

    def test_same_fact_merges_into_a_new_version_linked_to_its_sources(
        self, indexed: MemoryEngine
    ) -> None:
        engine = indexed
        first = engine.store(_new(TWINS[0], "walks_dog", importance=2, tags=("pets",)))
        second = engine.store(_new(TWINS[1], "dog_walks", importance=4, tags=("routine",)))
        others = engine.store_many([_new(v) for v in NEAR_MISSES])
        rev = engine.current_rev(THREAD)

        report = _run(self._consolidator(engine))

        assert (report.merges, report.merged_away, report.judge) == (1, 1, "offline")
        active = {m.id: m for m in _active(engine)}
        assert set(active) == {*report.merged_ids, *(m.id for m in others)}
        merged = active[report.merged_ids[0]]
        # A new version of the oldest memory's lineage: never an in-place overwrite.
        assert (merged.lineage_id, merged.version, merged.supersedes_id) == (first.id, 2, first.id)
        assert merged.value == TWINS[1]  # the newer wording
        assert (merged.importance, set(merged.tags)) == (4, {"pets", "routine"})
        assert engine.get(first.id, account_id=ACCOUNT).state == MemoryState.SUPERSEDED
        edges = engine.search_index.edges(ACCOUNT, [merged.id])
        assert {(e.to_id, e.relation_type) for e in edges if e.from_id == merged.id} >= {
            (first.id, MERGED_FROM),
            (second.id, MERGED_FROM),
        }
        # The merged-away memory left retrieval, is audited and can be restored.
        gone = engine.get(second.id, account_id=ACCOUNT)
        assert gone.state == MemoryState.SOFT_DELETED and gone.purge_at is not None
        assert engine.history(second.id, account_id=ACCOUNT)[0].event == HistoryEventType.MERGE
        event = engine.history(merged.id, account_id=ACCOUNT)[0]
        assert event.event == HistoryEventType.MERGE
        assert event.meta["merged_ids"] == [second.id]
        # The thread sees one "merged" bullet, and the worker's merge is counted.
        header = engine.delta_since(THREAD, rev, account_id=ACCOUNT, user_id=USER)
        [bullet] = header.splitlines()[1:]
        assert bullet.startswith("- ↔merged: [") and f"{TWINS[1]} (imp=4)" in bullet
        assert engine.op_counts(by="op").get("merge") == 1
        assert engine.op_counts(by="node").get("worker", 0) >= 1
        restored = engine.restore(second.id, account_id=ACCOUNT)
        assert restored.state == MemoryState.ACTIVE

    def test_different_facts_are_linked_never_merged(self, indexed: MemoryEngine) -> None:
        engine = indexed
        stored = engine.store_many([_new(v) for v in NEAR_MISSES])
        report = _run(self._consolidator(engine, consolidation_cosine_min=0.3))
        assert report.judged >= 2 and report.merges == 0
        assert {m.id for m in _active(engine)} == {m.id for m in stored}
        assert report.links == report.judged
        assert engine.op_counts(by="op").get("link") == report.links
        related = {
            frozenset((e.from_id, e.to_id))
            for e in engine.search_index.edges(ACCOUNT, [m.id for m in stored])
        }
        assert frozenset((stored[0].id, stored[1].id)) in related

    def test_judged_pairs_wait_for_the_recheck_period_and_the_daily_cap_holds(
        self, indexed: MemoryEngine
    ) -> None:
        engine = indexed
        # Important, so they stay candidates when nothing changed in the last 72 hours.
        engine.store_many([_new(v, importance=3) for v in NEAR_MISSES])
        consolidator = self._consolidator(
            engine, consolidation_cosine_min=0.3, consolidation_pairs_per_day=1
        )
        now = utcnow()
        first = _run(consolidator, now=now)
        assert (first.judged, first.capped) == (1, True)
        assert _run(consolidator, now=now).capped  # the day's one pair is spent
        tables = SqlConsolidationTables(engine.storage.database)
        tomorrow = _run(consolidator, now=now + timedelta(days=1))
        assert tomorrow.judged == 1
        # Not yesterday's pair again: two pairs have been judged, one a day.
        assert tables.judged_since(ACCOUNT, USER, 0.0) == 2
        everything = self._consolidator(engine, consolidation_cosine_min=0.3)
        within = _run(everything, now=now + timedelta(days=2))
        assert (within.judged, within.skipped) == (0, 2)  # both wait for the recheck period
        fortnight = now + timedelta(days=16)  # both pairs judged over 14 days ago
        rechecked = _run(everything, now=fortnight)
        assert rechecked.skipped == 0 and rechecked.judged == 2

    def test_candidates_are_recent_important_or_most_retrieved(self, indexed: MemoryEngine) -> None:
        engine = indexed
        plain = engine.store_many([_new(v, importance=2) for v in NEAR_MISSES[:2]])
        consolidator = self._consolidator(engine, consolidation_cosine_min=0.3)
        later = utcnow() + timedelta(days=4)  # past the 72 hours: nothing changed recently
        assert _run(consolidator, now=later).candidates == 0
        engine.storage.touch(ACCOUNT, [plain[0].id], utcnow().timestamp())
        retrieved = _run(consolidator, now=later)
        assert (retrieved.candidates, retrieved.judged) == (1, 1)
        engine.store(_new(NEAR_MISSES[2], importance=3))
        important = _run(consolidator, now=later + timedelta(days=15))
        assert important.candidates == 2  # the retrieved one and the important one
        beyond = _run(consolidator, now=utcnow() + timedelta(days=100))
        assert beyond.pairs == 0  # nothing changed within 90 days

    def test_a_failing_model_leaves_the_data_as_it_was(self, indexed: MemoryEngine) -> None:
        engine = indexed
        engine.store_many([_new(v) for v in (*TWINS, *NEAR_MISSES)])
        rev = engine.current_rev(THREAD)
        before = sorted((m.id, m.row_version) for m in _active(engine))
        # The first prompt calls every pair one fact; the second fails.
        all_same = json.dumps({"pairs": [{"pair": n, "same": True} for n in range(1, 6)]})
        replies = [ScriptedReply(content=all_same)]
        with ScriptedLLMServer(replies, default=ScriptedReply(status=500)) as server:
            llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
            judge = LLMJudge(llm, largest_batch=5)
            consolidator = self._consolidator(engine, judge, consolidation_cosine_min=0.3)
            with pytest.raises(ProviderError):
                _run(consolidator)
            assert len(server.requests) >= 2
        assert sorted((m.id, m.row_version) for m in _active(engine)) == before
        assert engine.current_rev(THREAD) == rev
        tables = SqlConsolidationTables(engine.storage.database)
        assert tables.judged_since(ACCOUNT, USER, 0.0) == 0  # judged again next time

    def test_the_llm_judge_waits_while_the_budget_is_low(
        self, indexed: MemoryEngine, settings: Settings
    ) -> None:
        engine = indexed
        engine.store_many([_new(v) for v in TWINS])
        ledger = UsageLedger(SqlAppTables(engine.storage), budget_units=1.0)
        ledger.record(
            account_id=ACCOUNT,
            operation="extraction",
            scope=None,
            prompt_tokens=1000,
            completion_tokens=0,
        )
        with ScriptedLLMServer([]) as server:
            llm = MeteredLLM(
                OpenAICompatibleLLM(base_url=server.base_url, model="scripted"), ledger
            )
            report = _run(self._consolidator(engine, LLMJudge(llm, ledger=ledger)))
            assert report.deferred and server.requests == []
        assert len(_active(engine)) == 2

    def test_erasure_removes_the_judged_pairs(self, indexed: MemoryEngine) -> None:
        engine = indexed
        engine.store_many([_new(v) for v in NEAR_MISSES])
        assert _run(self._consolidator(engine, consolidation_cosine_min=0.3)).judged > 0
        assert engine.storage.count_rows("consolidation_pairs", ACCOUNT, USER) > 0
        engine.erase_user(account_id=ACCOUNT, user_id=USER)
        assert engine.storage.count_rows("consolidation_pairs", ACCOUNT, USER) == 0

    def test_a_store_made_before_consolidation_upgrades(
        self, storage: Storage, engine: MemoryEngine
    ) -> None:
        app = Confide(engine, embedder=HashingEmbedder(dims=256), settings=engine.settings)
        try:
            stored = engine.store_many([_new(v) for v in TWINS])
            # As a store made before consolidation left it: no judged pairs, no access counts.
            with storage.database.transaction() as tx:
                for statement in (
                    "DROP TABLE consolidation_pairs",
                    "DROP INDEX memories_accessed",
                    "ALTER TABLE memories DROP COLUMN access_count",
                ):
                    tx.run(statement)
            unrecord_steps(storage, "memories", version=9)
            unrecord_steps(storage, "consolidation", version=1, and_later=True)
            storage.migrate()
            assert storage.schema_versions() == latest_versions()
            engine.storage.touch(ACCOUNT, [stored[0].id], utcnow().timestamp())
            tables = SqlConsolidationTables(engine.storage.database)
            assert tables.most_retrieved(ACCOUNT, USER, 5) == [stored[0].id]
            assert _run(self._consolidator(engine)).merges == 1
        finally:
            app.access.close()

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_judged_pairs_and_retrieval_counts_work_as_their_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        memory = add(confined_engine, value="tea")
        pairs = SqlConsolidationTables(confined.database)
        for account in (OWN_ACCOUNT, OTHER):
            pairs.record_judged(account, "user-1", [("fp-1", "same"), ("fp-2", "distinct")], 5.0)
        assert pairs.judged(OWN_ACCOUNT, "user-1", ["fp-1", "fp-3"]) == {"fp-1": 5.0}
        assert pairs.judged_since(OWN_ACCOUNT, "user-1", 5.0) == 2
        assert pairs.forget_judged(OWN_ACCOUNT, "user-1", 6.0) == 2
        assert pairs.judged_since(OTHER, "user-1", 0.0) == 2
        confined.touch(OWN_ACCOUNT, [memory.id], 7.0)
        assert pairs.most_retrieved(OWN_ACCOUNT, "user-1", 5) == [memory.id]
