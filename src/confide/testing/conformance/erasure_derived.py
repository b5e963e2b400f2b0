"""Conformance: erasure reaches what was derived from the user, and never fails a writer.

Derived rows are those that name the user or one of their conversations without being the
user's own rows: queued and finished jobs, the LLM usage ledger's scopes, operational
events, change-log threads, and app memories written from the user's words. After
``erase_user`` none of them holds the user's id or a conversation id of theirs in clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.storage import open_storage
from confide.storage.base import IndexWrites
from confide.storage.keystore import open_key_store
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import TEST_KEK, StorageHarness
from confide.testing.embedders import HashingEmbedder
from confide.types import Memory, MemoryFilter


def _other_process(
    storage_url: str, key_store_url: str, settings: Settings, request: pytest.FixtureRequest
) -> MemoryEngine:
    """An engine with connections of its own to the same data and key store."""
    engine = MemoryEngine(
        open_storage(storage_url),
        KeyRing(primary=TEST_KEK),
        settings=settings,
        key_store=open_key_store(key_store_url),
    )
    request.addfinalizer(engine.close)
    return engine


class _ErasesAfterPrepare:
    """An indexer placed after the vector indexer: the first write it sees has its
    neighbours searched already when another process erases the user, so the erasure
    commits between the write's preparation and its transaction."""

    def __init__(self, operator: MemoryEngine, user_id: str) -> None:
        self.operator = operator
        self.user_id = user_id
        self.erased = 0

    def prepare(self, memories: Sequence[Memory]) -> list[Any]:
        if not self.erased:
            self.operator.erase_user(account_id=ACCOUNT, user_id=self.user_id)
            self.erased += 1
        return [None for _ in memories]

    def write(self, tx: IndexWrites, memory: Memory, prepared: Any) -> None:
        """Nothing to write."""


class DerivedErasureConformance(StorageHarness):
    """Erasure removes derived rows, and a concurrent erasure never fails a write."""

    def test_a_write_whose_neighbours_were_erased_meanwhile_succeeds(
        self,
        engine: MemoryEngine,
        storage_url: str,
        key_store_url: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """The write's edges point at memories the erasure deleted: they are dropped, and the
        write is sealed under the user's new key, instead of failing on a foreign key."""
        engine.add_indexer(
            VectorIndexer(engine.storage, HashingEmbedder(), link_top_k=3, link_min=0.0)
        )
        for n in range(3):
            add(engine, key=f"garden-{n}", value=f"the garden roses bloom in june {n}")
        operator = _other_process(storage_url, key_store_url, engine.settings, request)
        race = _ErasesAfterPrepare(operator, "user-1")
        engine.add_indexer(race)

        written = add(engine, key="garden-again", value="the garden roses bloom in june again")

        assert race.erased == 1
        listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert [m.id for m in listed] == [written.id]
        assert engine.storage.edges(ACCOUNT, [written.id]) == []
