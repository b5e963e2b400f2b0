"""Erasure on PostgreSQL with the least-privileged service role docs/security.md describes:
the scrub uses only the grants listed there, names the grant it lacks when one is missing,
stays pending until it is given, and leaves nothing of the erased user in the server's files
(relations and ``pg_wal``, read as the operator on the database's host)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.engine.residue import scan_files
from confide.storage import FEATURES
from confide.storage.keystore import open_key_store
from confide.storage.postgres import PostgresStorage
from confide.storage.scrubs import SqlScrubTables
from confide.testing.postgres import EmbeddedPostgres

KEK = bytes(range(32))
ACCOUNT = "acme"
DOCUMENTED_GRANTS = (
    "GRANT pg_checkpoint TO {role}",
    "GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {role}",
)
"""The grants docs/security.md asks for in each of the two databases (besides owning them)."""


@dataclass
class ServiceRole:
    name: str
    data_url: str
    keys_url: str
    server: EmbeddedPostgres

    def grant(self, statement: str) -> None:
        """Run a grant as the superuser in both databases (a function's privileges are
        recorded per database)."""
        for url in (self.data_url, self.keys_url):
            superuser = url.replace(f"//{self.name}:", "//postgres:", 1)
            with psycopg.connect(superuser, autocommit=True) as conn:
                conn.execute(statement.format(role=self.name))

    def operator_files(self) -> list[Path]:
        """The files of both databases and pg_wal, located as the superuser."""
        files: list[Path] = []
        for url in (self.data_url, self.keys_url):
            storage = PostgresStorage(
                url.replace(f"//{self.name}:", "//postgres:", 1), features=FEATURES
            )
            try:
                files += storage.data_files()
            finally:
                storage.close()
        return list(dict.fromkeys(files))


@pytest.fixture
def role(postgres_server: EmbeddedPostgres) -> Iterator[ServiceRole]:
    """A login role that owns a data and a keys database (with pgvector installed by the
    superuser) and has no other privilege yet."""
    name = f"svc_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE ROLE {name} LOGIN;")
    databases = [f"{name}_data", f"{name}_keys"]
    for database in databases:
        postgres_server.psql(f'CREATE DATABASE "{database}" OWNER {name};')
        with psycopg.connect(postgres_server.uri(database), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    urls = [postgres_server.uri(d).replace("//postgres:", f"//{name}:", 1) for d in databases]
    yield ServiceRole(name, urls[0], urls[1], postgres_server)
    for database in databases:
        postgres_server.drop_database(database)
    postgres_server.psql(f"DROP OWNED BY {name}; DROP ROLE {name};")


def _engine(role: ServiceRole, tmp_path: Path) -> MemoryEngine:
    storage = PostgresStorage(role.data_url, max_size=2, features=FEATURES)
    storage.migrate()
    return MemoryEngine(
        storage,
        KeyRing(primary=KEK),
        settings=Settings(home=tmp_path / "home", encryption_key=KEK.hex(), embedder="none"),
        key_store=open_key_store(role.keys_url),
    )


def _fill(engine: MemoryEngine) -> None:
    for index in range(3):
        engine.store(
            {"account_id": ACCOUNT, "user_id": "u-1", "key": f"k{index}", "value": f"okapi {index}"}
        )
    engine.store({"account_id": ACCOUNT, "user_id": "u-2", "key": "k", "value": "bystander"})


def test_with_the_documented_grants_an_erasure_leaves_nothing_in_the_servers_files(
    role: ServiceRole, tmp_path: Path
) -> None:
    for grant in DOCUMENTED_GRANTS:
        role.grant(grant)
    engine = _engine(role, tmp_path)
    try:
        assert engine.storage.scrub_privileges() == []  # type: ignore[attr-defined]
        _fill(engine)
        receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1")
    finally:
        engine.close()

    # The service role may not read the server's files, so it cannot verify them itself:
    # it says so instead of calling the erasure verified.
    assert receipt.status == "scrubbed" and receipt.blocked_by is None
    assert "verify-erasure" in receipt.scrubbed["data"] or receipt.scan is None
    files = role.operator_files()
    assert any(p.parent.name == "pg_wal" for p in files)
    found = scan_files(files, receipt.markers)
    assert found.clean, found.found
    assert receipt.markers.key_ids and receipt.markers.fragments


@pytest.mark.erasure_may_pend
def test_a_missing_grant_is_named_and_the_scrub_stays_pending_until_it_is_given(
    role: ServiceRole, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    role.grant(DOCUMENTED_GRANTS[0])  # pg_checkpoint only: pg_switch_wal() is refused
    with caplog.at_level(logging.WARNING, logger="confide.storage.postgres"):
        engine = _engine(role, tmp_path)
    try:
        switch = f"GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {role.name}"
        assert engine.storage.scrub_privileges() == [switch]  # type: ignore[attr-defined]
        assert any(switch in r.getMessage() for r in caplog.records)
        _fill(engine)

        receipt = engine.erase_user(account_id=ACCOUNT, user_id="u-1", settle_seconds=0)

        assert receipt.status == "pending"
        assert receipt.blocked_by is not None and switch in receipt.blocked_by
        assert "pg_checkpoint" not in receipt.blocked_by
        assert SqlScrubTables(engine.storage.database).pending()[0].id == receipt.id

        role.grant(DOCUMENTED_GRANTS[1])
        assert [r.status for r in engine.retry_scrubs()] == ["scrubbed"]
    finally:
        engine.close()
    found = scan_files(role.operator_files(), receipt.markers)
    assert found.clean, found.found
