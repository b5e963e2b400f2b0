"""The database seam: what every table-owning module needs of a SQL database.

A backend (SQLite, PostgreSQL) implements :class:`Database`: connections, transactions,
row-level security, placeholders. The memory store and each feature's tables (chat messages,
app memories, jobs, checkpoints, call sessions, scrubs, keys) are written once against it,
with ``?``-style SQL run through :class:`Statements`, so a feature adds its tables without
touching a backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["Capability", "Connection", "Cursor", "Database", "Statements"]


class Capability(StrEnum):
    """What a backend may or may not offer beyond the protocol (see :attr:`Database.capabilities`).

    Every backend stores, searches (vectors and BM25) and writes in transactions; these
    name the differences callers and tests branch on.
    """

    HNSW = "hnsw"
    """Vector search walks an approximate graph index kept in the database."""
    MULTI_PROCESS = "multi_process"
    """Many processes (workers on several hosts) may serve one database at once."""
    IN_PROCESS_VECTORS = "in_process_vectors"
    """The vector index lives in this process's memory, loaded from the database."""
    DATA_FILES = "data_files"
    """:meth:`Storage.data_files` names the files that hold the data (readable here)."""
    SEALED_VECTORS = "sealed_vectors"
    """Stored embeddings are sealed under their owner's key and opened in this process (see
    :meth:`Storage.bind_vector_opener`); a store without it keeps them in clear to search
    them in the database."""
    ROW_SECURITY = "row_security"
    """The database confines each transaction to one account's rows (row-level security)."""


class Cursor(Protocol):
    """The part of a DB-API cursor we use."""

    def fetchone(self) -> Any:
        """The next row, or None when no row is left."""
        ...

    def fetchall(self) -> list[Any]:
        """The rows not fetched yet."""
        ...

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed."""
        ...


class Connection(Protocol):
    """The part of a DB-API connection we use (sqlite3 and psycopg both have ``execute``)."""

    def execute(self, sql: Any, params: Any = ...) -> Any:
        """Run one statement with its parameters; returns a cursor."""
        ...


class Statements(Protocol):
    """A reader's or a transaction's connection: ``?``-style SQL, confined to an account."""

    def run(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one ``?``-style statement in the database's dialect; returns its cursor."""
        ...

    def scope_to(self, account_id: str) -> None:
        """Confine what follows to one account's rows (row-level security where the
        database has it)."""
        ...

    def across_accounts(self) -> None:
        """Declare that what follows spans accounts (maintenance, the job queue)."""
        ...


class Database(Protocol):
    """One SQL database: reads confined to an account or across accounts, and write
    transactions."""

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgres``."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this database offers of :class:`Capability`."""
        ...

    def reader(self, account_id: str) -> AbstractContextManager[Statements]:
        """A connection for reads of one account's rows."""
        ...

    def reader_across_accounts(self) -> AbstractContextManager[Statements]:
        """A connection for reads that span accounts."""
        ...

    def transaction(self) -> AbstractContextManager[Statements]:
        """A write transaction: commits on normal exit, rolls back on any exception."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
