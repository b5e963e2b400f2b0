"""The storage interface the engine is built on.

A backend stores rows; it never sees plaintext memory text. Validation, encryption,
versioning and history live once, in the engine, above this protocol. Every write goes
through :meth:`Storage.transaction`, so a memory row, its history event and its change-log
entry commit together or not at all.

The interface is cut into roles, so a consumer asks for the part it uses: the reads
(:class:`MemoryRows`, :class:`AuditLog`, :class:`SearchIndex`, :class:`StoreAdmin`) and,
inside a transaction, the writes (:class:`RowWrites`, :class:`AuditWrites`,
:class:`IndexWrites`) with the reads a write needs on the transaction's own connection, so
no operation needs a second one. :class:`Storage` and :class:`Transaction` are their sums.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from confide.storage.database import Capability as Capability
from confide.storage.database import Database, ScrubOutcome, TransactionStatements
from confide.storage.schema import Derived
from confide.types import MemoryFilter

Vector = NDArray[np.float32]


SERVICE_KEYS_BLINDED = "service_keys_blinded"
"""Like :data:`KEYS_BLINDED`, for the service tables' keys (proposals, session events)."""

KEYS_BLINDED = "keys_blinded"
"""The ``store_meta`` entry that says whether every stored memory key is blinded (``done``)
or the engine must still upgrade rows an older version wrote with clear keys (``pending``)."""


class MemoryRow(NamedTuple):
    """One stored memory version, as the backend holds it (value encrypted).

    A named tuple rather than a frozen dataclass: a query builds a row for every candidate
    it reads, and a tuple is built several times faster.

    ``row_version`` starts at 1 and grows with every in-place change of the row (forget,
    restore, visibility, superseding), so ``(id, row_version)`` names one state of a
    version: writers compare it to what they read and lose if it moved. Access times
    (``Storage.touch``) do not count: a read must not fail a writer.
    """

    id: str
    account_id: str
    user_id: str
    agent_id: str | None
    run_id: str | None
    actor_id: str | None
    role: str | None
    subject_id: str | None
    type: str
    category: str | None
    key: str
    confidence: float
    importance: int
    source: str
    visibility: str
    pinned: bool
    state: str
    version: int
    row_version: int
    supersedes_id: str | None
    lineage_id: str
    created_at: float
    updated_at: float
    last_accessed_at: float | None
    purge_at: float | None
    expires_at: float | None
    app_id: str | None
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes


MEMORY_COLUMNS: tuple[str, ...] = MemoryRow._fields


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """An audit-history event; refers to versions by id, never carries memory text."""

    id: int
    account_id: str
    user_id: str
    memory_id: str
    lineage_id: str
    event: str
    old_ref: str | None
    new_ref: str | None
    actor: str | None
    meta: str
    ts: float


@dataclass(frozen=True, slots=True)
class ChangeRow:
    """A change-log entry of one thread."""

    thread_id: str
    rev: int
    memory_id: str
    event: str
    meta: str
    ts: float
    account_id: str = ""
    """The account of the memory (filled in on reads; writes pass it beside the row)."""


@dataclass(frozen=True, slots=True)
class DataKeyRow:
    """A user (or account index) key wrapped by a KEK.

    ``generation`` counts the user's erasures: a key of an older generation was destroyed.
    """

    account_id: str
    user_id: str
    purpose: str
    key_id: str
    wrapped: bytes
    kek_id: str
    created_at: float
    generation: int = 0


@dataclass(frozen=True, slots=True)
class OpRow:
    """An operational event."""

    account_id: str | None
    user_id: str | None
    thread_id: str | None
    node: str
    op: str
    status: str
    memory_id: str | None
    category: str | None
    sim: float | None
    ts: float


@dataclass(frozen=True, slots=True)
class ScoredId:
    """A memory id with a retrieval score (cosine similarity or BM25).

    ``row`` is the memory's stored row when the search read it anyway (it already checked
    the filter against it), so the caller need not read it again.
    """

    memory_id: str
    score: float
    row: MemoryRow | None = None


@dataclass(frozen=True, slots=True)
class EdgeRow:
    """A relation edge between two memory versions."""

    from_id: str
    to_id: str
    relation_type: str
    strength: float


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    """The edges of some memories, and the rows at their other ends, all within one filter.

    ``similarity`` holds the cosine of each neighbour to the query vector, when one was given;
    ``vectors`` the neighbours' stored embeddings, when they were asked for instead (so the
    edges can be read before the query is embedded and scored once it is).
    """

    edges: list[EdgeRow]
    rows: list[MemoryRow]
    similarity: dict[str, float]
    vectors: dict[str, Vector] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Page:
    """Ordering and paging of a listing."""

    limit: int = 100
    offset: int = 0
    newest_first: bool = True


class RowWrites(Protocol):
    """Writes of memory rows, and the reads a write needs, inside one transaction."""

    def scope_to(self, account_id: str) -> None:
        """Confine the rest of this transaction to one account's rows, where the database
        enforces row-level security (the per-account writes below call it themselves).

        Raises :class:`~confide.errors.StorageError` when it already works for another.
        """
        ...

    def across_accounts(self) -> None:
        """Declare that this transaction's work spans accounts (sweeps, upgrades); each use
        is listed in docs/security.md."""
        ...

    def insert_memory(self, row: MemoryRow) -> None:
        """Insert a memory version."""
        ...

    def update_memory(self, memory_id: str, fields: Mapping[str, Any]) -> None:
        """Set columns of one memory version (never its id or owner) and bump its row version."""
        ...

    def lock_lineage(self, account_id: str, lineage_id: str) -> MemoryRow | None:
        """The current head of a lineage, locked against concurrent writers."""
        ...

    def lineage_ids(self, account_id: str, lineage_id: str) -> list[str]:
        """Ids of every version of one memory, oldest first (read in this transaction)."""
        ...

    def existing_memory_ids(self, account_id: str, memory_ids: Sequence[str]) -> set[str]:
        """Which of these memory versions of the account still exist (read in this
        transaction)."""
        ...

    def delete_memories(self, memory_ids: Sequence[str]) -> int:
        """Hard-delete memory versions (history and change log stay: they hold no text)."""
        ...

    def sealed_values(self, account_id: str, user_id: str, *, limit: int) -> list[bytes]:
        """Ciphertexts and wrapped data keys of one user's rows (at most ``limit`` rows of
        each table), read before an erasure deletes them."""
        ...

    def delete_owner(
        self, account_id: str, user_id: str, *, derived: Derived | None = None
    ) -> dict[str, int]:
        """Delete every row of one user in every table, and first every row derived from
        them (see :mod:`confide.storage.derived`; ``derived``: what the engine knows of
        them); counts per table."""
        ...

    def key_generation(self, account_id: str, user_id: str) -> int | None:
        """The user's key generation, locked against erasure until commit (None: no row)."""
        ...

    def bump_key_generation(self, account_id: str, user_id: str) -> int:
        """Start a new key generation for the user (erasure); returns it."""
        ...

    def erased_at(self, account_id: str, user_id: str) -> float | None:
        """When the user was last erased (``None``: never), locked against an erasure until
        commit like :meth:`key_generation`."""
        ...


class AuditWrites(Protocol):
    """Audit history, change log, operational events and store facts, beside the rows."""

    def add_history(self, row: HistoryRow) -> None:
        """Append an audit event (its ``id`` is assigned by the database)."""
        ...

    def add_history_many(self, rows: Sequence[HistoryRow]) -> None:
        """Append audit events in order, as one write where the backend can (a memory's
        edges are audited together)."""
        ...

    def next_rev(self, account_id: str, thread_id: str, count: int = 1) -> int:
        """Advance the thread's revision counter by ``count`` (serialised) and return its new
        value: the last of the ``count`` consecutive revisions this caller now owns."""
        ...

    def add_change(self, account_id: str, row: ChangeRow) -> None:
        """Append a change-log entry."""
        ...

    def advance_read(self, account_id: str, thread_id: str, reader: str) -> tuple[int, int] | None:
        """Move ``reader``'s seen revision of the thread to the current one; ``(seen,
        current)`` when there were unseen changes, else ``None`` (exactly one of two racing
        callers gets a range)."""
        ...

    def replace_audit_key(self, memory_id: str, stored_key: str) -> int:
        """Set the ``key`` entry of every history and change-log meta of one memory version
        to ``stored_key`` (the blinded key, when upgrading an older store); rows changed."""
        ...

    def record_op(self, row: OpRow) -> None:
        """Append an operational event."""
        ...

    def record_ops(self, rows: Sequence[OpRow]) -> None:
        """Append operational events."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a ``store_meta`` entry."""
        ...


@dataclass(frozen=True, slots=True)
class SealedVector:
    """An embedding sealed under its owner's key, as a store with
    :attr:`Capability.SEALED_VECTORS` keeps it (``key_id`` names the user key)."""

    key_id: str
    blob: bytes


@dataclass(frozen=True, slots=True)
class StoredVector:
    """One stored embedding as read back: sealed (``key_id`` set) or, written before vectors
    were sealed, in clear (``key_id`` ``None``: float32 bytes)."""

    memory_id: str
    model_id: str
    key_id: str | None
    data: bytes


class VectorOpener(Protocol):
    """Opens a user's sealed embeddings for a store that searches them in process."""

    def open_vectors(
        self, account_id: str, user_id: str, rows: Sequence[StoredVector]
    ) -> list[bytes | None]:
        """Each row's vector as float32 bytes, or ``None`` for a row that does not open
        (tampered, moved to another row or user, or its key destroyed by an erasure).

        Bytes rather than arrays: a store loading a whole index joins them into one matrix
        at once, which costs a fraction of building an array per row."""
        ...

    def seal_snapshot(self, account_id: str, user_id: str, data: bytes) -> SealedVector:
        """``data`` (a store's snapshot of the user's ready-to-search index) sealed under the
        user's current key, bound to the owner."""
        ...

    def open_snapshot(self, account_id: str, user_id: str, sealed: SealedVector) -> bytes | None:
        """A snapshot sealed by :meth:`seal_snapshot`, or ``None`` when it does not open
        (tampered, moved to another user, or its key destroyed by an erasure)."""
        ...


class IndexWrites(Protocol):
    """Index rows written beside a memory version: blind tokens, vectors, relation edges."""

    def put_tokens(
        self, memory_id: str, account_id: str, user_id: str, tokens: Mapping[int, int]
    ) -> None:
        """Replace a memory's blind lexical tokens (keyed hash -> term frequency)."""
        ...

    def put_vector(
        self,
        memory_id: str,
        account_id: str,
        user_id: str,
        model_id: str,
        vector: Vector | SealedVector,
    ) -> None:
        """Store a memory's embedding (needs :meth:`Storage.bind_embedder` first): sealed on
        a store with :attr:`Capability.SEALED_VECTORS`, in clear on any other."""
        ...

    def put_edges(self, account_id: str, user_id: str, edges: Sequence[EdgeRow]) -> None:
        """Add relation edges; an existing ``(from_id, to_id)`` pair is left as it is."""
        ...

    def delete_index(self, memory_ids: Sequence[str]) -> None:
        """Drop tokens, vectors and relation edges of these memory versions."""
        ...

    def seal_vectors_in_place(self, sealed: Sequence[tuple[str, SealedVector]]) -> int:
        """Replace clear embeddings (by memory id) with their sealed form; returns how many
        changed (stores with :attr:`Capability.SEALED_VECTORS`)."""
        ...


class Transaction(RowWrites, AuditWrites, IndexWrites, TransactionStatements, Protocol):
    """Writes inside one database transaction; see :meth:`Storage.transaction`.

    It is also the database seam's :class:`~confide.storage.database.TransactionStatements`,
    so a feature whose rows must commit with memory writes runs its own SQL on it (the
    engine's ``commit_batch(within=...)`` hands it over) rather than adding methods here."""


class MemoryRows(Protocol):
    """Reads of stored memory rows (the filter always runs in the database)."""

    def get_memory(self, account_id: str, memory_id: str) -> MemoryRow | None:
        """One version by id, within an account."""
        ...

    def get_memories(self, account_id: str, memory_ids: Sequence[str]) -> list[MemoryRow]:
        """Several versions by id, within an account (order not guaranteed)."""
        ...

    def find_by_key(
        self, account_id: str, user_id: str, key: str, states: Sequence[str]
    ) -> MemoryRow | None:
        """The newest head version with this key (case-insensitive) in the given states."""
        ...

    def filter_memories(self, flt: MemoryFilter, memory_ids: Sequence[str]) -> list[MemoryRow]:
        """Those of ``memory_ids`` that match ``flt`` (the filter runs in the database)."""
        ...

    def has_others_shared(self, flt: MemoryFilter) -> bool:
        """Whether ``flt`` (with ``include_shared``) reaches any other user's memory."""
        ...

    def touch(self, account_id: str, memory_ids: Sequence[str], when: float) -> None:
        """Set ``last_accessed_at`` of these versions (no audit event)."""
        ...

    def count_memories(self, flt: MemoryFilter) -> int:
        """How many versions match the filter."""
        ...

    def list_memories(self, flt: MemoryFilter, page: Page) -> list[MemoryRow]:
        """Memory versions matching every filter, applied in the database."""
        ...

    def iter_owner(self, account_id: str, user_id: str) -> Iterator[MemoryRow]:
        """Every version one user owns, oldest first."""
        ...

    def lineage(self, account_id: str, lineage_id: str) -> list[MemoryRow]:
        """All versions of one memory, oldest first."""
        ...

    def due_for_purge(self, now: float, limit: int) -> list[MemoryRow]:
        """Soft-deleted heads whose ``purge_at`` has passed."""
        ...

    def due_for_ttl(
        self, now: float, *, idle_before: float, importance_below: int, limit: int
    ) -> list[MemoryRow]:
        """Active heads the TTL retires: past their ``expires_at``, or idle (neither
        updated nor read) since ``idle_before`` with importance below ``importance_below``
        and not pinned."""
        ...

    def scope_memory_ids(
        self, account_id: str, user_id: str | None, agent_id: str | None
    ) -> list[str]:
        """Ids of every version in a scope (for an admin purge)."""
        ...

    def clear_key_rows(self, limit: int) -> list[MemoryRow]:
        """Up to ``limit`` memory versions whose key column is not blinded (an older store)."""
        ...


class AuditLog(Protocol):
    """Reads of the audit history, the change log and operational events."""

    def history(self, account_id: str, lineage_id: str) -> list[HistoryRow]:
        """Audit events of every version of a memory, newest first."""
        ...

    def owner_history(self, account_id: str, user_id: str) -> list[HistoryRow]:
        """Audit events of every memory one user owns, oldest first (for their export)."""
        ...

    def changes_since(
        self,
        thread_id: str,
        rev: int,
        limit: int,
        *,
        account_id: str | None,
        upto: int | None = None,
    ) -> list[ChangeRow]:
        """Change-log entries after ``rev`` (and at most ``upto``), newest first: of one
        account, or (``account_id=None``) of every account that wrote to the thread."""
        ...

    def current_rev(self, thread_id: str, *, account_id: str | None) -> int:
        """The thread's revision (0 when nothing was written), as one account sees it or
        (``account_id=None``) across accounts."""
        ...

    def unseen(self, account_id: str, thread_id: str, reader: str) -> bool:
        """Whether the account's thread has a revision ``reader`` has not seen."""
        ...

    def op_counts(
        self,
        *,
        by: str,
        since: float | None,
        until: float | None,
        account_id: str | None = None,
    ) -> dict[str, int]:
        """Operational events counted by ``op``, ``node`` or ``status`` in a time window (of
        one account when ``account_id`` is given)."""
        ...

    def op_events(
        self,
        account_id: str,
        *,
        since: float | None = None,
        node: str | None = None,
        op: str | None = None,
        limit: int = 1000,
    ) -> list[OpRow]:
        """One account's operational events since ``since`` (of ``node`` and ``op`` when
        given), oldest first, at most ``limit``."""
        ...


class SearchIndex(Protocol):
    """Search over the index rows: vectors (cosine), blind BM25, relation edges."""

    def vector_search(self, flt: MemoryFilter, vector: Vector, k: int) -> list[ScoredId]:
        """The ``k`` most similar memories (cosine) among those matching ``flt``.

        Returns the full top-k whenever at least ``k`` memories match the filter, however
        selective it is.
        """
        ...

    def lexical_search(
        self, flt: MemoryFilter, tokens: Sequence[int], k: int, *, k1: float, b: float
    ) -> list[ScoredId]:
        """The ``k`` best memories by BM25 over blind ``tokens`` among those matching ``flt``."""
        ...

    def common_tokens(
        self,
        account_id: str,
        user_id: str | None,
        tokens: Sequence[int],
        *,
        share: float,
        at_least: int,
    ) -> set[int]:
        """The blind ``tokens`` held by at least ``share`` of the owner's memories and by
        ``at_least`` of them (the owner: the user, or the whole account for ``None``)."""
        ...

    def edges(self, account_id: str, memory_ids: Sequence[str]) -> list[EdgeRow]:
        """Edges touching any of ``memory_ids``, in either direction."""
        ...

    def neighbourhood(
        self,
        flt: MemoryFilter,
        memory_ids: Sequence[str],
        vector: Vector | None,
        *,
        with_vectors: bool = False,
    ) -> Neighbourhood:
        """Edges touching ``memory_ids`` whose other end matches ``flt``, with those rows.

        One read for what retrieval's edge expansion needs: the edges, the neighbours' rows
        and (given ``vector``) their cosine similarity to it, or (``with_vectors``, no
        ``vector``) their stored embeddings.
        """
        ...

    def vectors(self, account_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """Stored embeddings of these memory versions."""
        ...

    def similarities(
        self, account_id: str, memory_ids: Sequence[str], vector: Vector
    ) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of these memory versions' embeddings."""
        ...

    def bind_embedder(self, model_id: str, dims: int) -> None:
        """Record the embedder and create its vector index; refuse a different embedder."""
        ...

    def embedder_spec(self) -> str | None:
        """The bound embedder as ``model_id:dims``, if any."""
        ...

    def unbind_embedder(self) -> None:
        """Forget the bound embedder and drop all vectors (before a reindex)."""
        ...

    def clear_vectors(self, limit: int) -> list[tuple[str, str, str, str, Vector]]:
        """Up to ``limit`` embeddings still in clear on a store that seals them, as
        ``(memory_id, account_id, user_id, model_id, vector)`` (none on other stores)."""
        ...

    def bind_vector_opener(self, opener: VectorOpener) -> None:
        """How this store opens sealed embeddings (used with
        :attr:`Capability.SEALED_VECTORS`; other stores ignore it)."""
        ...


class StoreAdmin(Protocol):
    """The store as a whole: schema, store facts, key generations, scrubbing, counts."""

    def migrate(self) -> None:
        """Apply pending schema migrations (idempotent)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...

    def schema_versions(self) -> dict[str, int]:
        """The newest applied migration of each feature, by name (``memories``: the memory
        store's own)."""
        ...

    def meta_value(self, key: str) -> str | None:
        """A ``store_meta`` entry, if set."""
        ...

    def key_generation(self, account_id: str, user_id: str) -> int:
        """The user's current key generation, recorded (as 0) when the user has none yet."""
        ...

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Make deleted rows unrecoverable from the database's files; says what was done.

        Called after erasure, purge and key rotation; its words go into receipts and
        reports. An outcome that is not ``complete`` names what blocked it, and the caller
        records the scrub as owed (see :mod:`confide.storage.scrubs`). ``rebuild`` asks for the
        database to be rewritten whole, for residue an ordinary scrub left behind (a scan
        found it): a backend whose scrub always rewrites may ignore it.
        """
        ...

    def legacy_data_keys(self) -> list[DataKeyRow]:
        """Wrapped keys kept in the data database by stores made before the key store."""
        ...

    def drop_legacy_data_keys(self) -> None:
        """Delete the keys :meth:`legacy_data_keys` returned (once they are in the key store)."""
        ...

    def data_files(self, *, shared: bool = True) -> list[Path]:
        """The files on this host that hold the database's data, its logs included.

        For at-rest and forensic checks, which read them as raw bytes. ``shared=False``
        leaves out files the server writes for other databases too (PostgreSQL's WAL). Only
        backends with :attr:`Capability.DATA_FILES` can name them; others raise
        :class:`StorageError`.
        """
        ...

    def user_ids(self, account_id: str, *, limit: int = 1000) -> list[str]:
        """The ids of the account's users that have memories (not purged), sorted."""
        ...

    def count_rows(self, table: str, account_id: str, user_id: str) -> int:
        """Rows of one user in a table (for tests and receipts)."""
        ...


class Storage(MemoryRows, AuditLog, SearchIndex, StoreAdmin, Protocol):
    """A storage backend. Implementations: ``SqliteStorage``, ``PostgresStorage``."""

    name: ClassVar[str]

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend offers of :class:`Capability`."""
        ...

    @property
    def database(self) -> Database:
        """The database seam beneath this store: the one features' tables are written
        against (and tests that prepare a store's state in SQL)."""
        ...

    def transaction(self) -> AbstractContextManager[Transaction]:
        """A write transaction: commits on normal exit, rolls back on any exception."""
        ...
