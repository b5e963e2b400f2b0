"""A store confined to one account, as the service's own role sees it (PostgreSQL).

Superusers (and roles with ``BYPASSRLS``) are never confined by PostgreSQL, so the suites
that check row-level security make an ordinary role, give it the tables the way a
deployment's service role has them (it owns them: the policies are ``FORCE``d), and read
through it. The ``confined`` store goes further: its policies have no bypass, so a statement
that runs across accounts (``confide.all_accounts``) sees no row and may write none. The
memory store's suites and each feature's use it to show their reads and writes of one
account work there, which they do only when they run as their account.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.base import Storage
from confide.storage.keystore import KeyStore
from confide.testing.conformance.harness import TEST_KEK, StorageHarness

if TYPE_CHECKING:
    from confide.storage.postgres import PostgresStorage

__all__ = ["OTHER", "ConfinedRoleHarness", "connect_as_admin", "count_rows"]

OTHER = "acct-2"


def connect_as_admin(conninfo: str, **overrides: Any) -> Any:
    """A psycopg connection (autocommit) to ``conninfo`` with ``overrides`` applied."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    return psycopg.connect(make_conninfo(conninfo, **overrides), autocommit=True)


def count_rows(conn: Any, table: str, account_id: str) -> int:
    """How many of ``account_id``'s rows of ``table`` ``conn`` sees."""
    row = conn.execute(f"SELECT count(*) FROM {table} WHERE account_id = %s", [account_id])
    return int(row.fetchone()[0])


def _account_tables(conn: Any) -> list[str]:
    """The tables of the current schema with an ``account_id`` column."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN information_schema.columns i "
        "ON i.table_schema = n.nspname AND i.table_name = c.relname "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND i.column_name = 'account_id'"
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def _policies_without_bypass(conn: Any) -> None:
    """Replace each account policy by one that ignores ``confide.all_accounts``.

    The job queue and the owed scrubs keep theirs: claiming jobs and retrying every pending
    scrub span accounts by nature.
    """
    for table in _account_tables(conn):
        if table in ("jobs", "scrubs"):
            continue
        allowed = "account_id = current_setting('confide.account_id', true)"
        if table == "ops_events":
            allowed = f"account_id IS NULL OR {allowed}"
        conn.execute(f"DROP POLICY IF EXISTS confide_account ON {table}")
        conn.execute(
            f"CREATE POLICY confide_account ON {table} USING ({allowed}) WITH CHECK ({allowed})"
        )


class ConfinedRoleHarness(StorageHarness):
    """The fixtures of a store confined to one account: ``app_role``, ``confined`` and
    ``confined_engine`` (PostgreSQL only; tests using them require
    :attr:`Capability.ROW_SECURITY`)."""

    @pytest.fixture
    def app_role(self, storage: Storage) -> Iterator[str]:
        """An ordinary role that owns this store's tables, as a deployment's service role."""
        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009 - PostgreSQL only
        role = f"confide_app_{uuid.uuid4().hex[:10]}"
        with connect_as_admin(conninfo) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
            admin.execute(f"GRANT ALL ON SCHEMA public TO {role}")
            tables = admin.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
            for (table,) in tables:
                admin.execute(f"ALTER TABLE {table} OWNER TO {role}")
            admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
            # What docs/security.md asks for, so that erasure scrubs the files completely.
            admin.execute(f"GRANT pg_checkpoint TO {role}")
            admin.execute(f"GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {role}")
        try:
            yield role
        finally:
            with connect_as_admin(conninfo) as admin:
                admin.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
                admin.execute(f"DROP OWNED BY {role}")
                admin.execute(f"DROP ROLE {role}")

    @pytest.fixture
    def confined(self, storage: Storage, app_role: str) -> Iterator[PostgresStorage]:
        """The store as the service role, under account policies without the bypass."""
        from psycopg.conninfo import make_conninfo

        from confide.storage.postgres import PostgresStorage

        conninfo = str(getattr(storage, "conninfo"))  # noqa: B009
        with connect_as_admin(conninfo) as admin:
            _policies_without_bypass(admin)
        store = PostgresStorage(
            make_conninfo(conninfo, user=app_role), max_size=2, features=FEATURES
        )
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def confined_engine(
        self, confined: PostgresStorage, engine: MemoryEngine, key_store: KeyStore
    ) -> Iterator[MemoryEngine]:
        """An engine over the ``confined`` store (its events written before it closes)."""
        confined_engine = MemoryEngine(
            confined, KeyRing(primary=TEST_KEK), settings=engine.settings, key_store=key_store
        )
        yield confined_engine
        confined_engine.ops.close()
