"""Conformance: erasure reaches what was derived from the user, and never fails a writer.

Derived rows are those that name the user or one of their conversations without being the
user's own rows: queued and finished jobs, the LLM usage ledger's scopes, operational
events, change-log threads, and app memories written from the user's words. After
``erase_user`` none of them holds the user's id or a conversation id of theirs in clear.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest

from confide.apps import AppMemories
from confide.chat.messages import MessageStore
from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.llm.base import LLM
from confide.llm.usage import UsageLedger
from confide.storage.apps import SqlAppTables
from confide.storage.base import IndexWrites, Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.blind_keys import raw_rows
from confide.testing.conformance.harness import StorageHarness, other_process
from confide.testing.embedders import HashingEmbedder
from confide.types import Memory, MemoryFilter
from confide.workers.conversation_jobs import enqueue_chat_summary
from confide.workers.memory_jobs import enqueue_insights
from confide.workers.multifact_trigger import enqueue_multifact

USER = "user-okapi-417"
CONVERSATION = "conv-okapi-529"
APP_CONVERSATION = "app-conv-okapi-631"
BYSTANDER = "user-2"
BYSTANDER_CONVERSATION = "conv-bystander-1"
DERIVED_TABLES = ("jobs", "llm_usage", "ops_events")
"""The tables that name users and conversations without being a user's own rows."""


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
        operator = other_process(storage_url, key_store_url, engine.settings, request)
        race = _ErasesAfterPrepare(operator, "user-1")
        engine.add_indexer(race)

        written = add(engine, key="garden-again", value="the garden roses bloom in june again")

        assert race.erased == 1
        listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert [m.id for m in listed] == [written.id]
        assert engine.storage.edges(ACCOUNT, [written.id]) == []

    def test_erasure_leaves_no_id_of_the_user_in_derived_rows(self, engine: MemoryEngine) -> None:
        for user, conversation in ((USER, CONVERSATION), (BYSTANDER, BYSTANDER_CONVERSATION)):
            _derive_rows(engine, user, conversation)
        engine.ops.flush()
        before = raw_rows(engine.storage, DERIVED_TABLES)
        for name in (USER.lower(), CONVERSATION.lower()):
            assert name in before  # the probe finds what it looks for while it is there

        receipt = engine.erase_user(account_id=ACCOUNT, user_id=USER)

        engine.ops.flush()
        after = raw_rows(engine.storage, DERIVED_TABLES)
        for name in (USER.lower(), CONVERSATION.lower()):
            assert name not in after
        for name in (BYSTANDER.lower(), BYSTANDER_CONVERSATION.lower()):
            assert name in after  # another user's rows stay
        assert receipt.deleted["jobs"] == 3 and receipt.deleted["llm_usage_scopes"] == 2
        # The ledger keeps the spending, without the scope.
        [totals] = SqlAppTables(engine.storage).usage_totals(ACCOUNT, since=None)
        assert totals.calls == 4
        # No table but the key generations (which must outlive the erasure) names the user
        # or their conversations.
        every_table = raw_rows(engine.storage, _tables(engine.storage, but=("key_generations",)))
        for name in (USER.lower(), CONVERSATION.lower()):
            assert name not in every_table
        if engine.storage.name == "sqlite":  # nothing left to carve from the file either
            files = b"".join(p.read_bytes() for p in engine.storage.data_files(shared=False))
            assert CONVERSATION.encode() not in files
            assert f"{ACCOUNT}/{USER}".encode() not in files  # the user's change-log thread

    def test_app_memories_written_from_the_user_go_with_them(self, engine: MemoryEngine) -> None:
        apps = AppMemories(engine)
        ended = {
            user: asyncio.run(
                apps.end_conversation(
                    account_id=ACCOUNT,
                    app_id="notes",
                    conversation_id=f"{APP_CONVERSATION}-{user}",
                    messages=[{"role": "user", "content": f"I prefer the {user} layout."}],
                    user_id=user,
                )
            ).memory
            for user in (USER, BYSTANDER)
        }
        anonymous = asyncio.run(
            apps.end_conversation(
                account_id=ACCOUNT,
                app_id="notes",
                conversation_id=APP_CONVERSATION,
                messages=[{"role": "user", "content": "I prefer short answers."}],
            )
        ).memory
        mine, theirs = ended[USER], ended[BYSTANDER]
        assert mine is not None and theirs is not None and anonymous is not None
        stored = engine.storage.iter_owner(ACCOUNT, "app:notes")
        rows = [r for r in stored if r.id == mine.id]
        assert len(rows) == 1

        receipt = engine.erase_user(account_id=ACCOUNT, user_id=USER)

        assert receipt.deleted["derived_memories"] == 1
        assert {m.id for m in apps.memories(ACCOUNT, "notes")} == {
            theirs.id,
            anonymous.id,
        }
        assert engine.storage.get_memory(ACCOUNT, rows[0].id) is None
        if engine.storage.name == "sqlite":
            files = b"".join(p.read_bytes() for p in engine.storage.data_files(shared=False))
            assert rows[0].ciphertext not in files


def _derive_rows(engine: MemoryEngine, user: str, conversation: str) -> None:
    """Rows that name ``user`` or ``conversation`` beside the user's own: a memory (its
    change-log thread), a chat message, three jobs, two ledger entries, two events."""
    add(engine, key="city", value="Oslo", user_id=user)
    MessageStore(engine).add(
        {
            "account_id": ACCOUNT,
            "user_id": user,
            "conversation_id": conversation,
            "role": "user",
            "content": "I moved to Oslo.",
        }
    )
    enqueue_chat_summary(engine, account_id=ACCOUNT, conversation_id=conversation)
    enqueue_multifact(
        engine, account_id=ACCOUNT, user_id=user, conversation_id=conversation, index=0
    )
    # Queueing needs only that a model is configured; the job is never run here.
    enqueue_insights(engine, cast(LLM, object()), account_id=ACCOUNT, user_id=user)
    ledger = UsageLedger(SqlAppTables(engine.storage))
    for scope in (f"user:{user}", f"conversation:{conversation}"):
        ledger.record(
            account_id=ACCOUNT,
            operation="extraction",
            scope=scope,
            prompt_tokens=10,
            completion_tokens=5,
        )
    engine.emit_op("context", "search", account_id=ACCOUNT, user_id=user)
    engine.emit_op("hotpath", "search", account_id=ACCOUNT, thread_id=conversation)


def _tables(storage: Storage, *, but: tuple[str, ...]) -> tuple[str, ...]:
    """Every table of the store's own schema, except ``but``."""
    sql = (
        "SELECT name FROM sqlite_master WHERE type = 'table'"
        if storage.name == "sqlite"
        else "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    )
    with storage.database.transaction() as tx:
        tx.across_accounts()
        names = [str(r[0]) for r in tx.run(sql).fetchall()]
    return tuple(n for n in names if n not in but and not n.startswith("sqlite_"))
