"""Row-level security: the database itself keeps each account's rows from the others.

Superusers (and roles with ``BYPASSRLS``) are never confined by PostgreSQL, so these tests
make an ordinary role, give it the tables the way a deployment's service role has them (it
owns them: the policies are ``FORCE``d), and read through it with a raw SQL connection.

The ``confined`` store (:mod:`confide.testing.conformance.confined`) goes further: its
policies have no bypass. The memory store's reads and writes of one account (threads, the
TTL sweep) must still work there; each feature's suite checks its own tables the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.errors import NotFoundError, StorageError
from confide.index.vectors import VectorIndexer
from confide.storage import FEATURES
from confide.storage.apps import SqlAppTables
from confide.storage.base import Capability, Storage
from confide.storage.keystore import KeyStore
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.confined import (
    OTHER,
    ConfinedRoleHarness,
    connect_as_admin,
    count_rows,
)
from confide.testing.conformance.harness import TEST_KEK
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter, MemoryState

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage


class RowSecurityConformance(ConfinedRoleHarness):
    """Another account's rows are invisible to a connection confined to one account."""

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_a_transaction_stays_with_one_account(self, storage: Storage) -> None:
        with pytest.raises(StorageError), storage.transaction() as tx:
            tx.next_rev("acct-1", "thread-1")
            tx.next_rev(OTHER, "thread-2")
        assert storage.current_rev("thread-1", account_id=None) == 0  # rolled back

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_every_account_table_is_forced(self, storage: Storage) -> None:
        """Every table with an ``account_id`` column, including tables added later: a new
        one must join ``ACCOUNT_TABLES`` (migrations) to be confined."""
        storage.bind_embedder("test-model", 8)  # the embeddings table appears with it
        with connect_as_admin(str(getattr(storage, "conninfo"))) as conn:  # noqa: B009
            rows = conn.execute(
                "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN information_schema.columns i "
                "ON i.table_schema = n.nspname AND i.table_name = c.relname "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
                "AND i.column_name = 'account_id'"
            ).fetchall()
        found = {str(r[0]): (bool(r[1]), bool(r[2])) for r in rows}
        assert {"memories", "history", "embeddings"} <= set(found)
        assert {t: v for t, v in found.items() if v != (True, True)} == {}

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_raw_connection_sees_only_its_own_account(
        self, engine: MemoryEngine, storage: Storage, app_role: str
    ) -> None:
        add(engine, value="first account's value")
        add(engine, value="second account's value", account_id=OTHER)
        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        with connect_as_admin(conninfo, user=app_role) as raw:
            # No account named: nothing at all.
            assert raw.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
            assert raw.execute("SELECT count(*) FROM history").fetchone()[0] == 0
            raw.execute("SELECT set_config('confide.account_id', %s, false)", ["acct-1"])
            for table in ("memories", "history", "memory_tokens", "changes", "threads"):
                assert count_rows(raw, table, OTHER) == 0, table
            assert count_rows(raw, "memories", "acct-1") == 1
            # Not even a query that asks for every row reaches the other account.
            owners = {r[0] for r in raw.execute("SELECT account_id FROM memories").fetchall()}
            assert owners == {"acct-1"}
            # Nor may it write into the other account.
            import psycopg

            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                raw.execute(
                    "INSERT INTO threads (thread_id, account_id, rev) VALUES ('t', %s, 1)",
                    [OTHER],
                )
            # An update of every row changes only its own account's.
            changed = raw.execute("UPDATE memories SET last_accessed_at = 1").rowcount
            assert changed == 1

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_service_works_as_the_confined_role(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore, app_role: str
    ) -> None:
        from psycopg.conninfo import make_conninfo

        from confide.storage.postgres import PostgresStorage

        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        confined = PostgresStorage(
            make_conninfo(conninfo, user=app_role), max_size=2, features=FEATURES
        )
        try:
            app = MemoryEngine(
                confined, KeyRing(primary=TEST_KEK), settings=engine.settings, key_store=key_store
            )
            try:
                embedder = HashingEmbedder()
                app.add_indexer(VectorIndexer(confined, embedder, link_top_k=2, link_min=0.0))
                mine = add(app, value="tea with lemon")
                theirs = add(app, value="coffee, black", account_id=OTHER)
                near = confined.vector_search(
                    MemoryFilter(account_id=OTHER, user_id="user-1"),
                    embedder.embed_one("coffee"),
                    5,
                )
                assert [h.memory_id for h in near] == [theirs.id]
                updated = app.update(mine.id, {"value": "tea with honey"}, account_id="acct-1")
                assert app.get(updated.id, account_id="acct-1").value == "tea with honey"
                listed = app.list_memories(MemoryFilter(account_id=OTHER, user_id="user-1"))
                assert [m.id for m in listed] == [theirs.id]
                with pytest.raises(NotFoundError):
                    app.get(theirs.id, account_id="acct-1")
                assert len(app.history(updated.id, account_id="acct-1")) >= 2
                app.erase_user(account_id="acct-1", user_id="user-1")
                assert app.list_memories(MemoryFilter(account_id="acct-1", user_id="user-1")) == []
                assert app.get(theirs.id, account_id=OTHER).value == "coffee, black"
            finally:
                app.ops.close()  # its events written before the store closes
        finally:
            confined.close()

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_work_across_accounts_sees_nothing_without_the_bypass(
        self, confined: PostgresStorage
    ) -> None:
        """What makes the tests below worth having: under the ``confined`` policies a read
        across accounts finds no row, so their reads find rows only as their account."""
        apps = SqlAppTables(confined)
        apps.put_app(ACCOUNT, "app-1", name=None, memory_cap=None, ts=1.0)
        assert apps.get_app(ACCOUNT, "app-1") is not None
        with confined.reader_across_accounts() as db:
            assert db.run("SELECT count(*) FROM apps").fetchone()[0] == 0

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_thread_reads_work_as_their_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        add(confined_engine, value="tea")
        add(confined_engine, value="coffee", account_id=OTHER)
        thread = f"{ACCOUNT}/user-1"
        assert confined.current_rev(thread, account_id=ACCOUNT) == 1
        changes = confined.changes_since(thread, 0, 10, account_id=ACCOUNT)
        assert [(c.rev, c.account_id) for c in changes] == [(1, ACCOUNT)]
        assert confined.unseen(ACCOUNT, thread, "agent")
        header = confined_engine.deliver_delta(account_id=ACCOUNT, user_id="user-1", reader="agent")
        assert "Favorite color is tea" in header
        assert not confined.unseen(ACCOUNT, thread, "agent")
        assert confined.current_rev(f"{OTHER}/user-1", account_id=ACCOUNT) == 0

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_memory_work_of_one_account_runs_as_that_account(
        self, confined: PostgresStorage, confined_engine: MemoryEngine
    ) -> None:
        embedder = HashingEmbedder()
        confined_engine.add_indexer(VectorIndexer(confined, embedder, link_top_k=2, link_min=0.0))
        mine = add(confined_engine, value="tea with lemon")
        theirs = add(confined_engine, value="coffee, black", account_id=OTHER)
        near = confined.vector_search(
            MemoryFilter(account_id=ACCOUNT, user_id="user-1"), embedder.embed_one("tea"), 5
        )
        assert [h.memory_id for h in near] == [mine.id]
        updated = confined_engine.update(mine.id, {"value": "tea with honey"}, account_id=ACCOUNT)
        assert confined_engine.get(updated.id, account_id=ACCOUNT).value == "tea with honey"
        assert len(confined_engine.history(updated.id, account_id=ACCOUNT)) >= 2
        confined_engine.forget(updated.id, account_id=ACCOUNT)
        restored = confined_engine.restore(updated.id, account_id=ACCOUNT)
        assert restored.value == "tea with honey"
        exported = confined_engine.export_user(account_id=ACCOUNT, user_id="user-1")
        assert {m["value"] for m in exported["memories"]} == {"tea with lemon", "tea with honey"}
        confined_engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert (
            confined_engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []
        )
        assert confined_engine.get(theirs.id, account_id=OTHER).value == "coffee, black"

    def test_the_ttl_sweep_retires_memories_of_several_accounts_in_one_run(
        self, engine: MemoryEngine
    ) -> None:
        past = datetime.now(UTC) - timedelta(days=1)
        mine = add(engine, key="trip", value="in Rome", expires_at=past)
        theirs = add(engine, key="trip", value="in Oslo", expires_at=past, account_id=OTHER)
        assert engine.expire_idle(idle_days=60, importance_below=0) == 2
        for memory_id, account_id in ((mine.id, ACCOUNT), (theirs.id, OTHER)):
            assert engine.get(memory_id, account_id=account_id).state == MemoryState.SOFT_DELETED
