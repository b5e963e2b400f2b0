"""Row-level security: the database itself keeps each account's rows from the others.

Superusers (and roles with ``BYPASSRLS``) are never confined by PostgreSQL, so these tests
make an ordinary role, give it the tables the way a deployment's service role has them (it
owns them: the policies are ``FORCE``d), and read through it with a raw SQL connection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from engram.crypto.keyring import KeyRing
from engram.engine import MemoryEngine
from engram.errors import NotFoundError, StorageError
from engram.index.vectors import VectorIndexer
from engram.storage.base import Capability, Storage
from engram.storage.keystore import KeyStore
from engram.testing.builders import add
from engram.testing.conformance.harness import TEST_KEK, StorageHarness
from engram.testing.embedders import HashingEmbedder
from engram.types import MemoryFilter

OTHER = "acct-2"


def _connect(conninfo: str, **overrides: Any) -> Any:
    import psycopg
    from psycopg.conninfo import make_conninfo

    return psycopg.connect(make_conninfo(conninfo, **overrides), autocommit=True)


def _count(conn: Any, table: str, account_id: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table} WHERE account_id = %s", [account_id])
    return int(row.fetchone()[0])


class RowSecurityConformance(StorageHarness):
    """Another account's rows are invisible to a connection confined to one account."""

    @pytest.fixture
    def app_role(self, storage: Storage) -> Iterator[str]:
        """An ordinary role that owns this store's tables, as a deployment's service role."""
        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009 - PostgreSQL only
        role = f"engram_app_{uuid.uuid4().hex[:10]}"
        with _connect(conninfo) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
            admin.execute(f"GRANT ALL ON SCHEMA public TO {role}")
            tables = admin.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
            for (table,) in tables:
                admin.execute(f"ALTER TABLE {table} OWNER TO {role}")
            admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
        try:
            yield role
        finally:
            with _connect(conninfo) as admin:
                admin.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
                admin.execute(f"DROP OWNED BY {role}")
                admin.execute(f"DROP ROLE {role}")

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_a_transaction_stays_with_one_account(self, storage: Storage) -> None:
        with pytest.raises(StorageError), storage.transaction() as tx:
            tx.next_rev("acct-1", "thread-1")
            tx.next_rev(OTHER, "thread-2")
        assert storage.current_rev("thread-1") == 0  # rolled back

    @pytest.mark.requires(Capability.ROW_SECURITY)
    def test_every_account_table_is_forced(self, storage: Storage) -> None:
        """Every table with an ``account_id`` column, including tables added later: a new
        one must join ``ACCOUNT_TABLES`` (migrations) to be confined."""
        storage.bind_embedder("test-model", 8)  # the embeddings table appears with it
        with _connect(str(getattr(storage, "conninfo"))) as conn:  # noqa: B009
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
        with _connect(conninfo, user=app_role) as raw:
            # No account named: nothing at all.
            assert raw.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
            assert raw.execute("SELECT count(*) FROM history").fetchone()[0] == 0
            raw.execute("SELECT set_config('engram.account_id', %s, false)", ["acct-1"])
            for table in ("memories", "history", "memory_tokens", "changes", "threads"):
                assert _count(raw, table, OTHER) == 0, table
            assert _count(raw, "memories", "acct-1") == 1
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

        from engram.storage.postgres import PostgresStorage

        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        confined = PostgresStorage(make_conninfo(conninfo, user=app_role), max_size=2)
        try:
            app = MemoryEngine(
                confined, KeyRing(primary=TEST_KEK), settings=engine.settings, key_store=key_store
            )
            embedder = HashingEmbedder()
            app.add_indexer(VectorIndexer(confined, embedder, link_top_k=2, link_min=0.0))
            mine = add(app, value="tea with lemon")
            theirs = add(app, value="coffee, black", account_id=OTHER)
            near = confined.vector_search(
                MemoryFilter(account_id=OTHER, user_id="user-1"), embedder.embed_one("coffee"), 5
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
            confined.close()
