"""The database seam: what every table-owning module needs of a SQL database.

A backend (SQLite, PostgreSQL) implements :class:`Database`: connections, transactions,
row-level security, placeholders. The memory store and each feature's tables (chat messages,
app memories, jobs, checkpoints, call sessions, scrubs, keys) are written once against it,
with ``?``-style SQL run through :class:`Statements`, so a feature adds its tables without
touching a backend. A feature whose rows must commit with memory writes takes the memory
transaction as :class:`TransactionStatements` (the engine's ``commit_batch(within=...)``
hands it over) and runs its own SQL on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

__all__ = [
    "Capability",
    "Connection",
    "Cursor",
    "Database",
    "MemoryStore",
    "ScrubOutcome",
    "Statements",
    "TransactionStatements",
]


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


@dataclass(frozen=True, slots=True)
class ScrubOutcome:
    """What one scrub of a store's files did; ``blocked_by`` names what prevented part of
    it, in words an operator can act on (``None``: nothing is left for a later scrub)."""

    detail: str
    blocked_by: str | None = None

    @property
    def complete(self) -> bool:
        """Whether nothing is left for a later scrub to do."""
        return self.blocked_by is None


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


class TransactionStatements(Statements, Protocol):
    """A write transaction's connection: statements, and named locks held until it ends."""

    def lock(self, name: str) -> None:
        """Hold off other write transactions that lock the same name until this one ends; a
        no-op where the database already serialises writers, as SQLite does."""
        ...

    def pipelined(self) -> AbstractContextManager[None]:
        """A block whose statements may be sent without waiting for each one's answer.

        A batch of writes to a server costs one round trip per statement otherwise. A
        statement whose rows are read still waits for them; an error may surface at the
        latest when the block ends (the transaction then rolls back as on any error). A
        no-op where statements run in process, as SQLite's do.
        """
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

    def transaction(self) -> AbstractContextManager[TransactionStatements]:
        """A write transaction: commits on normal exit, rolls back on any exception."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


TransactionT_co = TypeVar("TransactionT_co", bound=TransactionStatements, covariant=True)


class MemoryStore(Protocol[TransactionT_co]):
    """The memory store, as a feature that writes through its transactions sees it
    (``confide.storage.Storage`` is one): the database seam beneath it, and its write
    transactions, of which the feature names (as ``TransactionT_co``) what it uses beyond
    statements, such as the user's key generation held against an erasure."""

    @property
    def database(self) -> Database:
        """The database seam beneath the store."""
        ...

    def transaction(self) -> AbstractContextManager[TransactionT_co]:
        """A memory write transaction: commits on normal exit, rolls back on any exception."""
        ...
