"""The key store: where wrapped user keys live, apart from the data they protect.

Erasing a user destroys their key here. By default the key store is not the database that
holds the ciphertexts: a SQLite file of its own (``keys.db`` in the data folder) or a
PostgreSQL database of its own. A backup or copy of the data then carries no key material,
so a copy taken before an erasure stays unreadable after it, even to someone holding the
key-encryption key. A store that keeps its keys beside the data (``colocated``) exists for
tests and benchmarks, where that separation does not matter.

Each user key has a *generation*: erasure bumps the user's generation in the data
database (see ``key_generations``) and destroys every key of the older ones, and writers
check the generation inside their data transaction, so a process that still caches a
destroyed key can never write under it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from confide.errors import ConfigurationError, StorageError
from confide.storage.base import DataKeyRow
from confide.storage.database import Database, ScrubOutcome
from confide.storage.migrations import key_tables
from confide.storage.schema import no_statistics

__all__ = ["KeyStore", "SqlKeyStore", "open_key_store"]

_KEY_COLUMNS = "account_id, user_id, purpose, key_id, wrapped, kek_id, created_at, generation"
PRIMARY_KEK = "primary_kek"


class KeyStore(Protocol):
    """Wrapped user keys by owner, purpose and generation."""

    location: str
    """Where the keys live, in words (for erasure receipts)."""

    def get(
        self,
        account_id: str,
        user_id: str,
        purpose: str,
        *,
        generation: int | None = None,
        key_id: str | None = None,
    ) -> DataKeyRow | None:
        """The key of an owner with this generation or id (the newest without either)."""
        ...

    def add(self, row: DataKeyRow) -> DataKeyRow:
        """Insert ``row`` unless its owner has a key of that generation; return the stored one."""
        ...

    def rows(self, *, not_kek_id: str | None = None, limit: int = 1000) -> list[DataKeyRow]:
        """Keys, optionally only those not wrapped under the given KEK."""
        ...

    def kek_usage(self) -> dict[str, int]:
        """How many keys each KEK wraps."""
        ...

    def rewrap(self, row: DataKeyRow, expected_kek_id: str) -> bool:
        """Replace a wrapped key if it is still under ``expected_kek_id``; True if replaced."""
        ...

    def owner_keys(
        self, account_id: str, user_id: str, purpose: str, *, before: int | None = None
    ) -> list[DataKeyRow]:
        """Every key of an owner and purpose (each generation, or those older than
        generation ``before``), oldest first."""
        ...

    def destroy(
        self, account_id: str, user_id: str, purpose: str, *, before: int | None = None
    ) -> list[str]:
        """Delete every key of an owner and purpose (or those of generations older than
        ``before``: a key a writer created for the new generation while an erasure ran
        protects data written after it); the ids of the keys destroyed."""
        ...

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Make deleted keys unrecoverable from the store's files; says what was done
        (``rebuild``: see :meth:`confide.storage.base.Storage.scrub`)."""
        ...

    def meta(self, key: str) -> str | None:
        """A fact about the store (e.g. the KEK new keys are wrapped under)."""
        ...

    def data_files(self, *, shared: bool = True) -> list[Path]:
        """The files that hold the keys (see :meth:`confide.storage.base.Storage.data_files`)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Record a fact about the store."""
        ...

    def has_keys(self) -> bool:
        """Whether any key is stored (then a key-encryption key must exist)."""
        ...

    def close(self) -> None:
        """Release connections (a colocated store leaves them to the data store)."""
        ...


class SqlRunner(Database, Protocol):
    """What a key store needs of a SQL database: the seam, and its files' scrubbing."""

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Make deleted rows unrecoverable from the database's files."""
        ...

    def data_files(self, *, shared: bool = True) -> list[Path]:
        """The files that hold the database, where readable from this process."""
        ...


def _owner_where(
    account_id: str, user_id: str, purpose: str, before: int | None
) -> tuple[str, list[Any]]:
    """The condition (and its parameters) for an owner's keys of a purpose, only those of
    generations older than ``before`` when it is given."""
    where = "account_id = ? AND user_id = ? AND purpose = ?"
    params: list[Any] = [account_id, user_id, purpose]
    if before is not None:
        where += " AND generation < ?"
        params.append(before)
    return where, params


def _row(values: Sequence[Any]) -> DataKeyRow:
    account_id, user_id, purpose, key_id, wrapped, kek_id, created_at, generation = values
    return DataKeyRow(
        account_id, user_id, purpose, key_id, bytes(wrapped), kek_id, created_at, int(generation)
    )


class SqlKeyStore:
    """A key store in a SQL database: its own (``owned``) or the data's (colocated)."""

    def __init__(self, runner: SqlRunner, *, location: str, owned: bool) -> None:
        self._runner = runner
        self.location = location
        self._owned = owned
        if owned:
            postgres = runner.dialect == "postgres"
            statements = (
                (
                    *key_tables("BYTEA", "DOUBLE PRECISION"),
                    *no_statistics("user_keys", ("wrapped", "key_id")),
                )
                if postgres
                else key_tables("BLOB", "REAL")
            )
            with runner.transaction() as tx:
                tx.across_accounts()  # the key store's schema
                if postgres:  # several workers may open the store at once
                    tx.run("SELECT pg_advisory_xact_lock(hashtext('confide-key-store'))")
                for statement in statements:
                    tx.run(statement)

    @classmethod
    def colocated(cls, runner: SqlRunner) -> SqlKeyStore:
        """Keys in the data database itself (tests and benchmarks: no backup separation)."""
        return cls(runner, location="beside the data, in the same database", owned=False)

    def get(
        self,
        account_id: str,
        user_id: str,
        purpose: str,
        *,
        generation: int | None = None,
        key_id: str | None = None,
    ) -> DataKeyRow | None:
        """The key of an owner with this generation or id (the newest without either)."""
        sql = f"SELECT {_KEY_COLUMNS} FROM user_keys WHERE account_id = ? AND user_id = ? "
        params: list[Any] = [account_id, user_id, purpose]
        sql += "AND purpose = ?"
        if generation is not None:
            sql += " AND generation = ?"
            params.append(generation)
        if key_id is not None:
            sql += " AND key_id = ?"
            params.append(key_id)
        with self._runner.reader_across_accounts() as db:
            row = db.run(sql + " ORDER BY generation DESC LIMIT 1", params).fetchone()
        return None if row is None else _row(row)

    def owner_keys(
        self, account_id: str, user_id: str, purpose: str, *, before: int | None = None
    ) -> list[DataKeyRow]:
        """Every key of an owner and purpose (each generation, or those older than
        generation ``before``), oldest first."""
        where, params = _owner_where(account_id, user_id, purpose, before)
        with self._runner.reader_across_accounts() as db:
            rows = db.run(
                f"SELECT {_KEY_COLUMNS} FROM user_keys WHERE {where} ORDER BY generation", params
            ).fetchall()
        return [_row(r) for r in rows]

    def add(self, row: DataKeyRow) -> DataKeyRow:
        """Insert ``row`` unless its owner has a key of that generation; return the stored one."""
        with self._runner.transaction() as tx:
            tx.across_accounts()
            tx.run(
                f"INSERT INTO user_keys ({_KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [
                    row.account_id,
                    row.user_id,
                    row.purpose,
                    row.key_id,
                    row.wrapped,
                    row.kek_id,
                    row.created_at,
                    row.generation,
                ],
            )
        stored = self.get(row.account_id, row.user_id, row.purpose, generation=row.generation)
        if stored is None:  # pragma: no cover - destroyed between the two statements
            raise StorageError("a user key vanished while it was being created")
        return stored

    def rows(self, *, not_kek_id: str | None = None, limit: int = 1000) -> list[DataKeyRow]:
        """Keys, optionally only those not wrapped under the given KEK."""
        sql = f"SELECT {_KEY_COLUMNS} FROM user_keys"
        params: list[Any] = []
        if not_kek_id is not None:
            sql += " WHERE kek_id <> ?"
            params.append(not_kek_id)
        with self._runner.reader_across_accounts() as db:
            found = db.run(sql + " ORDER BY account_id, user_id LIMIT ?", [*params, limit])
            return [_row(r) for r in found.fetchall()]

    def kek_usage(self) -> dict[str, int]:
        """How many keys each KEK wraps."""
        with self._runner.reader_across_accounts() as db:
            found = db.run("SELECT kek_id, COUNT(*) FROM user_keys GROUP BY kek_id").fetchall()
        return {str(kek): int(count) for kek, count in found}

    def rewrap(self, row: DataKeyRow, expected_kek_id: str) -> bool:
        """Replace a wrapped key if it is still under ``expected_kek_id``; True if replaced."""
        with self._runner.transaction() as tx:
            tx.across_accounts()
            cursor = tx.run(
                "UPDATE user_keys SET wrapped = ?, kek_id = ? WHERE account_id = ? "
                "AND user_id = ? AND purpose = ? AND key_id = ? AND kek_id = ?",
                [
                    row.wrapped,
                    row.kek_id,
                    row.account_id,
                    row.user_id,
                    row.purpose,
                    row.key_id,
                    expected_kek_id,
                ],
            )
            return bool(cursor.rowcount == 1)

    def destroy(
        self, account_id: str, user_id: str, purpose: str, *, before: int | None = None
    ) -> list[str]:
        """Delete every key of an owner and purpose (or those of generations older than
        ``before``); the ids of the keys destroyed."""
        where, params = _owner_where(account_id, user_id, purpose, before)
        with self._runner.transaction() as tx:
            tx.across_accounts()
            ids = [
                str(r[0])
                for r in tx.run(f"SELECT key_id FROM user_keys WHERE {where}", params).fetchall()
            ]
            tx.run(f"DELETE FROM user_keys WHERE {where}", params)
        return ids

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Make deleted keys unrecoverable from the store's files (see the runner's scrub)."""
        if not self._owned:
            return ScrubOutcome("keys live in the data database, scrubbed with it")
        return self._runner.scrub(rebuild=rebuild)

    def data_files(self, *, shared: bool = True) -> list[Path]:
        """The files of the database that holds the keys (the data's, when colocated)."""
        return self._runner.data_files(shared=shared)

    def meta(self, key: str) -> str | None:
        """A fact about the store."""
        with self._runner.reader_across_accounts() as db:
            row = db.run("SELECT value FROM key_meta WHERE key = ?", [key]).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Record a fact about the store."""
        with self._runner.transaction() as tx:
            tx.across_accounts()
            tx.run(
                "INSERT INTO key_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )

    def has_keys(self) -> bool:
        """Whether any key is stored."""
        with self._runner.reader_across_accounts() as db:
            return db.run("SELECT 1 FROM user_keys LIMIT 1").fetchone() is not None

    def close(self) -> None:
        """Release the store's own connections."""
        if self._owned:
            self._runner.close()


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except StorageError as exc:
        raise ConfigurationError(f"cannot open the key store: {exc}") from exc


def open_key_store(url: str) -> SqlKeyStore:
    """Open the key store at ``url``: ``sqlite:///path`` or ``postgresql://...``.

    A PostgreSQL key store should be a database of its own, ideally on another server, so
    that neither a dump nor a physical backup of the data carries keys.
    """
    scheme = url.split("://", 1)[0] if "://" in url else ""
    with _translated():
        if scheme == "sqlite":
            from confide.storage.sqlite import SqliteStorage

            path = url.split("://", 1)[1].removeprefix("/")
            sqlite = SqliteStorage(path, features=())
            return SqlKeyStore(
                sqlite, location=f"SQLite file {path}, apart from the data", owned=True
            )
        if scheme in ("postgresql", "postgres"):
            from confide.storage.postgres import PostgresStorage

            postgres = PostgresStorage(url, min_size=1, max_size=2, features=())
            name = url.rsplit("/", 1)[-1].split("?", 1)[0]
            return SqlKeyStore(
                postgres, location=f"PostgreSQL database {name}, apart from the data", owned=True
            )
    raise ConfigurationError(
        f"unknown key store URL scheme {scheme!r}; use sqlite:///path or postgresql://..."
    )
