"""SQL shared by the SQLite and PostgreSQL backends.

The backends differ in connection handling, DDL types and a few dialect details, which a
subclass supplies; the queries themselves are written once here with ``?`` placeholders.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np

from confide.crypto.envelope import BLIND_KEY_PREFIX
from confide.errors import EmbedderMismatchError, StorageError
from confide.storage.base import (
    MEMORY_COLUMNS,
    ChangeRow,
    DataKeyRow,
    EdgeRow,
    HistoryRow,
    MemoryRow,
    Neighbourhood,
    OpRow,
    Page,
    ScoredId,
    SealedVector,
    Vector,
    VectorOpener,
)
from confide.storage.database import Capability, Connection, Cursor, Database, ScrubOutcome
from confide.storage.filters import compile_filter, compile_others_shared
from confide.storage.migrations import LEGACY_VERSIONS, MEMORY_STORE
from confide.storage.schema import Derived, Feature
from confide.types import MemoryFilter, MemoryState

MEMORY_SELECT = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
# row_version is not set by callers: every update bumps it (see SqlTransaction.update_memory).
_UPDATABLE = frozenset(MEMORY_COLUMNS) - {
    "id",
    "account_id",
    "user_id",
    "lineage_id",
    "row_version",
    "app_id",
}


class NeighbourColumn(NamedTuple):
    """A column the neighbourhood read adds to each neighbour: its cosine to the query
    vector, its stored vector, or nothing (``kind`` says which)."""

    select: str
    join: str
    params: list[Any]
    kind: Literal["similarity", "vector", "none"]


NO_NEIGHBOUR_COLUMN = NeighbourColumn("NULL", "", [], "none")


class Bm25Score(NamedTuple):
    """A memory's BM25 over its postings ``t`` as SQL, with its parameters, and the clause
    that gathers each memory's postings.

    With one term a memory has one posting of it (``token`` and ``memory_id`` are a key), so
    there is nothing to add up: ``group_by`` is empty and ``sql`` scores the posting itself.
    That spares SQLite a sort of every posting by memory, most of a search's time when a
    term is scored on thousands of postings.
    """

    sql: str
    params: list[Any]
    group_by: str


@dataclass
class NeighbourRows:
    """Neighbours as a neighbourhood read returns them: each row and, per the column's
    ``kind``, its cosine to the query or its stored vector."""

    kind: str
    decode_vector: Callable[[Any], Vector]
    rows: dict[str, MemoryRow] = field(default_factory=dict)
    similarity: dict[str, float] = field(default_factory=dict)
    vectors: dict[str, Vector] = field(default_factory=dict)

    def add(self, value: Any, row: MemoryRow) -> None:
        """Keep ``row`` and the column's ``value`` beside it (``None``: nothing to keep)."""
        self.rows[row.id] = row
        if value is None:
            return
        if self.kind == "similarity":
            self.similarity[row.id] = float(value)
        elif self.kind == "vector":
            self.vectors[row.id] = self.decode_vector(value)


_UNREAD = object()

_OWNED_TABLES = ("memory_tokens", "relations", "embeddings")
# The memory store's tables with an owner, emptied by erasure after each feature's own.
_FIRST_OWNER_TABLES = ("history", "ops_events")
_LAST_OWNER_TABLES = ("memories", "data_keys")


def memory_row(values: Sequence[Any]) -> MemoryRow:
    """Build a :class:`MemoryRow` from a row selected in ``MEMORY_COLUMNS`` order."""
    if len(values) != len(MEMORY_COLUMNS):
        raise ValueError(f"a memory row has {len(MEMORY_COLUMNS)} columns, not {len(values)}")
    fields = list(values)
    fields[_PINNED] = bool(fields[_PINNED])
    fields[-2] = bytes(fields[-2])  # ciphertext
    fields[-1] = bytes(fields[-1])  # wrapped_key
    return MemoryRow._make(fields)


_PINNED = MEMORY_COLUMNS.index("pinned")
if MEMORY_COLUMNS[-2:] != ("ciphertext", "wrapped_key"):  # memory_row relies on the order
    raise ImportError("MemoryRow must end with ciphertext, wrapped_key")


def _data_key(values: Sequence[Any]) -> DataKeyRow:
    account_id, user_id, purpose, key_id, wrapped, kek_id, created_at = values
    return DataKeyRow(account_id, user_id, purpose, key_id, bytes(wrapped), kek_id, created_at)


class SqlExecutor:
    """Runs ``?``-style SQL on a connection, translating placeholders for the dialect."""

    placeholder: ClassVar[str] = "?"

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def run(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run ``?``-style ``sql`` in this dialect; returns its cursor."""
        if self.placeholder != "?":
            sql = sql.replace("?", self.placeholder)
        return self._execute(sql, tuple(params))

    def run_reusing_plan(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """:meth:`run` for a statement whose best plan is the same whatever its values: the
        database may plan it once per connection and reuse that plan.

        Only for statements that reach each table through a key they are given (a memory's
        id, an owner's term), never through a choice between indexes that the values
        decide: a reused plan is priced for an average owner, and one owner may hold most
        of the rows. Where the database keeps no plans across runs (SQLite plans each
        prepared statement once anyway), this is :meth:`run`.
        """
        return self.run(sql, params)

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Cursor:
        cursor: Cursor = self.conn.execute(sql, params)
        return cursor

    def scope_to(self, account_id: str) -> None:
        """Confine what follows in this transaction to one account's rows.

        A no-op where the database has no row-level security (SQLite); PostgreSQL sets
        ``confide.account_id`` for the rest of the transaction (see ``confide.storage.postgres``).
        """

    def across_accounts(self) -> None:
        """Declare that this transaction's work spans accounts (maintenance: migrations,
        purges, upgrades of older stores, the job queue).

        A no-op where the database has no row-level security; PostgreSQL lifts the account
        policies for the rest of the transaction. Listed in docs/security.md.
        """


class SqlTransaction(SqlExecutor):
    """Implements :class:`confide.storage.base.Transaction` on one open transaction."""

    lock_suffix: ClassVar[str] = ""
    named_lock_sql: ClassVar[str | None] = None
    """A statement taking a lock on a name (its one parameter) until commit (``None``: the
    backend serialises every write transaction already, as SQLite does)."""

    def lock(self, name: str) -> None:
        """Hold off other write transactions that lock ``name`` until this one ends."""
        if self.named_lock_sql is not None:
            self.run(self.named_lock_sql, [name])

    def pipelined(self) -> AbstractContextManager[None]:
        """Statements as they come (see :meth:`TransactionStatements.pipelined`)."""
        return nullcontext()

    def __init__(self, conn: Connection, *, features: Sequence[Feature] = ()) -> None:
        super().__init__(conn)
        self.features = tuple(features)
        """The features whose tables this store keeps (their owner rows go with erasure)."""

    def insert_memory(self, row: MemoryRow) -> None:
        """Insert a memory version, with its key lower-cased for case-insensitive lookups."""
        self.scope_to(row.account_id)
        columns = (*MEMORY_COLUMNS, "key_lc")
        values = [getattr(row, c) for c in MEMORY_COLUMNS] + [row.key.lower()]
        self.run(
            f"INSERT INTO memories ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})",
            values,
        )

    def update_memory(self, memory_id: str, fields: Mapping[str, Any]) -> None:
        """Set columns of one memory version and bump its row version.

        Raises:
            ValueError: a column that may not change (id, owner, lineage, row version).
        """
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"cannot update columns {sorted(unknown)}")
        assignments = [f"{name} = ?" for name in fields]
        params = list(fields.values())
        if "key" in fields:
            assignments.append("key_lc = ?")
            params.append(str(fields["key"]).lower())
        # Every in-place change moves the row version, so a writer that read the row before
        # this change fails its compare-and-set instead of overwriting it.
        assignments.append("row_version = row_version + 1")
        self.run(f"UPDATE memories SET {', '.join(assignments)} WHERE id = ?", [*params, memory_id])

    def lock_lineage(self, account_id: str, lineage_id: str) -> MemoryRow | None:
        """The newest version of a lineage, read with ``lock_suffix`` (None: no such lineage)."""
        self.scope_to(account_id)
        row = self.run(
            f"SELECT {MEMORY_SELECT} FROM memories m WHERE m.account_id = ? "
            "AND m.lineage_id = ? ORDER BY m.version DESC LIMIT 1" + self.lock_suffix,
            [account_id, lineage_id],
        ).fetchone()
        return memory_row(row) if row else None

    def lineage_ids(self, account_id: str, lineage_id: str) -> list[str]:
        """Ids of every version of one memory, oldest first (read in this transaction)."""
        self.scope_to(account_id)
        rows = self.run(
            "SELECT m.id FROM memories m WHERE m.account_id = ? AND m.lineage_id = ? "
            "ORDER BY m.version",
            [account_id, lineage_id],
        ).fetchall()
        return [str(r[0]) for r in rows]

    def existing_memory_ids(self, account_id: str, memory_ids: Sequence[str]) -> set[str]:
        """Which of these memory versions of the account still exist (read in this
        transaction)."""
        self.scope_to(account_id)
        found: set[str] = set()
        for chunk in _chunks(memory_ids):
            marks = ", ".join("?" for _ in chunk)
            rows = self.run(
                f"SELECT id FROM memories WHERE account_id = ? AND id IN ({marks})",
                [account_id, *chunk],
            ).fetchall()
            found.update(str(r[0]) for r in rows)
        return found

    def add_history(self, row: HistoryRow) -> None:
        """Append an audit event (the database assigns its ``id``)."""
        self.add_history_many([row])

    def add_history_many(self, rows: Sequence[HistoryRow]) -> None:
        """Append audit events in order (the database assigns their ``id``)."""
        for account_id in dict.fromkeys(row.account_id for row in rows):
            self.scope_to(account_id)
        self.insert_many(
            "INSERT INTO history (account_id, user_id, memory_id, lineage_id, event, old_ref, "
            "new_ref, actor, meta, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    row.account_id,
                    row.user_id,
                    row.memory_id,
                    row.lineage_id,
                    row.event,
                    row.old_ref,
                    row.new_ref,
                    row.actor,
                    row.meta,
                    row.ts,
                )
                for row in rows
            ],
        )

    def next_rev(self, account_id: str, thread_id: str, count: int = 1) -> int:
        """Advance the thread's revision counter by ``count`` and return its new value (the
        last of the revisions reserved; a new thread starts at 0)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        self.scope_to(account_id)
        # The upsert takes a row lock (PostgreSQL) or runs under the single writer (SQLite),
        # so concurrent writers of one thread get consecutive revisions.
        row = self.run(
            "INSERT INTO threads (thread_id, account_id, rev) VALUES (?, ?, ?) "
            "ON CONFLICT (thread_id) DO UPDATE SET rev = threads.rev + ? RETURNING rev",
            [thread_id, account_id, count, count],
        ).fetchone()
        return int(row[0])

    def advance_read(self, account_id: str, thread_id: str, reader: str) -> tuple[int, int] | None:
        """Move ``reader``'s seen revision of the thread to its current one.

        Returns ``(seen, current)`` when there were unseen changes (the range this caller now
        owns), ``None`` otherwise. A compare-and-set on the stored revision: of two callers
        racing for the same changes, exactly one gets them.
        """
        self.scope_to(account_id)
        self.run(
            "INSERT INTO thread_reads (thread_id, reader, account_id, seen_rev) "
            "VALUES (?, ?, ?, 0) ON CONFLICT (thread_id, reader) DO NOTHING",
            [thread_id, reader, account_id],
        )
        while True:
            row = self.run("SELECT rev FROM threads WHERE thread_id = ?", [thread_id]).fetchone()
            current = int(row[0]) if row else 0
            seen_row = self.run(
                "SELECT seen_rev FROM thread_reads WHERE thread_id = ? AND reader = ?",
                [thread_id, reader],
            ).fetchone()
            seen = int(seen_row[0])
            if seen >= current:
                return None
            moved = self.run(
                "UPDATE thread_reads SET seen_rev = ? "
                "WHERE thread_id = ? AND reader = ? AND seen_rev = ?",
                [current, thread_id, reader, seen],
            ).rowcount
            if moved == 1:
                return seen, current

    def add_change(self, account_id: str, row: ChangeRow) -> None:
        """Append a change-log entry."""
        self.scope_to(account_id)
        self.run(
            "INSERT INTO changes (thread_id, rev, account_id, memory_id, event, meta, ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [row.thread_id, row.rev, account_id, row.memory_id, row.event, row.meta, row.ts],
        )

    def put_tokens(
        self, memory_id: str, account_id: str, user_id: str, tokens: Mapping[int, int]
    ) -> None:
        """Replace a memory's blind lexical tokens (keyed hash -> term frequency)."""
        self.scope_to(account_id)
        self.run("DELETE FROM memory_tokens WHERE memory_id = ?", [memory_id])
        if not tokens:
            return
        doc_len = sum(tokens.values())
        self.insert_many(
            "INSERT INTO memory_tokens (memory_id, account_id, user_id, token, tf, doc_len) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(memory_id, account_id, user_id, tok, tf, doc_len) for tok, tf in tokens.items()],
        )

    def put_vector(
        self,
        memory_id: str,
        account_id: str,
        user_id: str,
        model_id: str,
        vector: Vector | SealedVector,
    ) -> None:
        """Replace a memory's embedding."""
        self.scope_to(account_id)
        self.run("DELETE FROM embeddings WHERE memory_id = ?", [memory_id])
        if isinstance(vector, SealedVector):
            self.put_sealed_vector(memory_id, account_id, user_id, model_id, vector)
            return
        self.run(
            "INSERT INTO embeddings (memory_id, account_id, user_id, model_id, "
            f"{self.vector_column}) VALUES (?, ?, ?, ?, {self.vector_param})",
            [memory_id, account_id, user_id, model_id, self.encode_vector(vector)],
        )

    vector_column: ClassVar[str] = "vector"
    vector_param: ClassVar[str] = "?"

    def put_sealed_vector(
        self, memory_id: str, account_id: str, user_id: str, model_id: str, sealed: SealedVector
    ) -> None:
        """Insert a sealed embedding (a backend that keeps them sealed overrides this)."""
        raise StorageError("this store keeps embeddings in clear; it cannot store sealed ones")

    def seal_vectors_in_place(self, sealed: Sequence[tuple[str, SealedVector]]) -> int:
        """Replace clear embeddings by sealed ones (a backend that seals them overrides this)."""
        raise StorageError("this store keeps embeddings in clear; it cannot store sealed ones")

    @staticmethod
    def encode_vector(vector: Vector) -> Any:
        """The database representation of a vector."""
        return np.asarray(vector, dtype=np.float32).tobytes()

    def put_edges(self, account_id: str, user_id: str, edges: Sequence[EdgeRow]) -> None:
        """Add relation edges, skipping self-loops and pairs that already exist."""
        self.scope_to(account_id)
        now = time.time()
        self.insert_many(
            "INSERT INTO relations (from_id, to_id, account_id, user_id, relation_type, "
            "strength, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [
                (e.from_id, e.to_id, account_id, user_id, e.relation_type, e.strength, now)
                for e in edges
                if e.from_id != e.to_id
            ],
        )

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert many rows with one statement per row (overridden where faster)."""
        for row in rows:
            self.run(sql, row)

    def delete_index(self, memory_ids: Sequence[str]) -> None:
        """Drop tokens, relation edges and vectors of these memory versions."""
        for chunk in _chunks(memory_ids):
            marks = ", ".join("?" for _ in chunk)
            self.run(f"DELETE FROM memory_tokens WHERE memory_id IN ({marks})", chunk)
            self.run(
                f"DELETE FROM relations WHERE from_id IN ({marks}) OR to_id IN ({marks})",
                [*chunk, *chunk],
            )
            if self.has_table("embeddings"):
                self.run(f"DELETE FROM embeddings WHERE memory_id IN ({marks})", chunk)

    def has_table(self, name: str) -> bool:
        """Whether a table exists (the embeddings table appears with the first embedder)."""
        raise NotImplementedError

    share_suffix: ClassVar[str] = ""
    """Appended to a read that must hold off a concurrent erasure until commit."""

    def key_generation(self, account_id: str, user_id: str) -> int | None:
        """The user's key generation, read with ``share_suffix`` (None: no row)."""
        self.scope_to(account_id)
        row = self.run(
            "SELECT generation FROM key_generations WHERE account_id = ? AND user_id = ?"
            + self.share_suffix,
            [account_id, user_id],
        ).fetchone()
        return None if row is None else int(row[0])

    def bump_key_generation(self, account_id: str, user_id: str) -> int:
        """Start a new key generation for the user (1 for the first), noting when (the
        erasure's time, see :meth:`record_ops`); returns it."""
        self.scope_to(account_id)
        row = self.run(
            "INSERT INTO key_generations (account_id, user_id, generation, erased_at) "
            "VALUES (?, ?, 1, ?) ON CONFLICT (account_id, user_id) DO UPDATE "
            "SET generation = key_generations.generation + 1, erased_at = excluded.erased_at "
            "RETURNING generation",
            [account_id, user_id, time.time()],
        ).fetchone()
        return int(row[0])

    def sealed_values(self, account_id: str, user_id: str, *, limit: int) -> list[bytes]:
        """Ciphertexts and wrapped data keys of one user's rows (newest first, at most
        ``limit`` rows per table): the markers an erasure looks for after deleting them."""
        self.scope_to(account_id)
        found: list[bytes] = []
        sealed = ("memories", *(t for f in self.features for t in f.sealed_tables))
        for table in sealed:
            if not self.has_table(table):
                continue
            rows = self.run(
                f"SELECT ciphertext, wrapped_key FROM {table} "
                "WHERE account_id = ? AND user_id = ? ORDER BY created_at DESC LIMIT ?",
                [account_id, user_id, limit],
            ).fetchall()
            for ciphertext, wrapped in rows:
                if ciphertext is not None:
                    found.append(bytes(ciphertext))
                found.append(bytes(wrapped))
        return found

    def delete_owner(
        self, account_id: str, user_id: str, *, derived: Derived | None = None
    ) -> dict[str, int]:
        """Delete every row derived from one user (each feature's erasure hook), then every
        row of theirs in every table; returns the count per table."""
        derived = derived or Derived()
        derived_counts: dict[str, int] = {}
        for feature in self.features:
            if feature.erase is not None:
                derived_counts |= feature.erase(self, account_id, user_id, derived)
        ids = [
            r[0]
            for r in self.run(
                "SELECT id FROM memories WHERE account_id = ? AND user_id = ?",
                [account_id, user_id],
            ).fetchall()
        ]
        counts: dict[str, int] = {}
        for table in _OWNED_TABLES:
            if not self.has_table(table):
                continue
            column = "from_id" if table == "relations" else "memory_id"
            deleted = 0
            for chunk in _chunks(ids):
                marks = ", ".join("?" for _ in chunk)
                where = f"{column} IN ({marks})"
                params: list[Any] = list(chunk)
                if table == "relations":
                    where += f" OR to_id IN ({marks})"
                    params += chunk
                deleted += self.run(f"DELETE FROM {table} WHERE {where}", params).rowcount
            counts[table] = deleted
        threads = self._threads_of(ids)
        changes = 0
        for chunk in _chunks(ids):
            marks = ", ".join("?" for _ in chunk)
            changes += self.run(f"DELETE FROM changes WHERE memory_id IN ({marks})", chunk).rowcount
        counts["changes"] = changes
        counts["threads"] = self._drop_emptied_threads(threads)
        owner = [account_id, user_id]
        feature_tables = [t for f in self.features for t in f.owner_tables]
        for table in (*_FIRST_OWNER_TABLES, *feature_tables, *_LAST_OWNER_TABLES):
            if table in feature_tables and not self.has_table(table):
                continue
            counts[table] = self.run(
                f"DELETE FROM {table} WHERE account_id = ? AND user_id = ?", owner
            ).rowcount
        return derived_counts | counts

    def _threads_of(self, memory_ids: Sequence[str]) -> set[str]:
        """The change-log threads that logged changes of ``memory_ids``."""
        found: set[str] = set()
        for chunk in _chunks(memory_ids):
            marks = ", ".join("?" for _ in chunk)
            sql = f"SELECT DISTINCT thread_id FROM changes WHERE memory_id IN ({marks})"
            found.update(str(r[0]) for r in self.run(sql, chunk).fetchall())
        return found

    def _drop_emptied_threads(self, threads: set[str]) -> int:
        """Delete each of ``threads`` left without changes, with its readers' positions (a
        user's own thread is named after them); how many were deleted."""
        dropped = 0
        for thread in sorted(threads):
            if self.run("SELECT 1 FROM changes WHERE thread_id = ? LIMIT 1", [thread]).fetchone():
                continue  # others' changes are logged there too
            if self.has_table("thread_reads"):
                self.run("DELETE FROM thread_reads WHERE thread_id = ?", [thread])
            dropped += self.run("DELETE FROM threads WHERE thread_id = ?", [thread]).rowcount
        return dropped

    def delete_memories(self, memory_ids: Sequence[str]) -> int:
        """Hard-delete memory versions and their index rows; returns how many versions."""
        self.delete_index(memory_ids)
        deleted = 0
        for chunk in _chunks(memory_ids):
            marks = ", ".join("?" for _ in chunk)
            deleted += self.run(f"DELETE FROM memories WHERE id IN ({marks})", chunk).rowcount
        return deleted

    def set_meta(self, key: str, value: str) -> None:
        """Set a ``store_meta`` entry, replacing an earlier value."""
        self.run(
            "INSERT INTO store_meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )

    def replace_audit_key(self, memory_id: str, stored_key: str) -> int:
        """Set the ``key`` in a memory version's history and change-log metas to ``stored_key``;
        returns how many rows changed."""
        changed = 0
        for table, row_key in (("history", "id"), ("changes", "thread_id, rev")):
            for *ident, meta in self.run(
                f"SELECT {row_key}, meta FROM {table} WHERE memory_id = ?", [memory_id]
            ).fetchall():
                entries = json.loads(meta)
                if not isinstance(entries, dict) or entries.get("key", stored_key) == stored_key:
                    continue
                entries["key"] = stored_key
                where = " AND ".join(f"{c.strip()} = ?" for c in row_key.split(","))
                self.run(
                    f"UPDATE {table} SET meta = ? WHERE {where}", [json.dumps(entries), *ident]
                )
                changed += 1
        return changed

    def record_op(self, row: OpRow) -> None:
        """Append an operational event."""
        self.record_ops([row])

    def record_ops(self, rows: Sequence[OpRow]) -> None:
        """Append operational events of one account (one statement for a batch).

        Events of a user erased since they happened are dropped: a process writes what it
        queued some seconds later, and the erasure deleted the user's events written until
        then (the erasure's row is locked meanwhile, so the two do not cross).
        """
        accounts = {row.account_id for row in rows if row.account_id is not None}
        if len(accounts) > 1:
            raise ValueError("operational events of several accounts in one transaction")
        for account_id in accounts:
            self.scope_to(account_id)
            erased = self._erased_at(account_id, {r.user_id for r in rows if r.user_id})
            rows = [r for r in rows if r.user_id not in erased or r.ts > erased[r.user_id]]
        if not rows:
            return
        self.insert_many(
            "INSERT INTO ops_events (account_id, user_id, thread_id, node, op, status, "
            "memory_id, category, sim, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    row.account_id,
                    row.user_id,
                    row.thread_id,
                    row.node,
                    row.op,
                    row.status,
                    row.memory_id,
                    row.category,
                    row.sim,
                    row.ts,
                )
                for row in rows
            ],
        )

    def erased_at(self, account_id: str, user_id: str) -> float | None:
        """When the user was last erased (``None``: never), read with ``share_suffix``."""
        self.scope_to(account_id)
        return self._erased_at(account_id, {user_id}).get(user_id)

    def _erased_at(self, account_id: str, user_ids: set[str]) -> dict[str, float]:
        """When each of ``user_ids`` was last erased (those never erased are left out), read
        with ``share_suffix`` so that an erasure under way is waited for."""
        found: dict[str, float] = {}
        for chunk in _chunks(sorted(user_ids)):
            marks = ", ".join("?" for _ in chunk)
            # Every row is read (and locked), erased or not: a row an erasure is changing
            # is waited for, then read as that erasure left it.
            for user_id, erased_at in self.run(
                "SELECT user_id, erased_at FROM key_generations WHERE account_id = ? "
                f"AND user_id IN ({marks})" + self.share_suffix,
                [account_id, *chunk],
            ).fetchall():
                if erased_at is not None:
                    found[str(user_id)] = float(erased_at)
        return found


def select_ids_where(
    db: SqlExecutor,
    columns: str,
    ids: Sequence[str],
    where: str,
    params: Sequence[Any],
    *,
    join: str = "",
    fenced: bool = False,
) -> list[Any]:
    """``SELECT columns FROM memories m [join] WHERE m.id IN (ids) AND where``, in chunks.

    ``fenced`` (PostgreSQL) reads the rows of ``ids`` behind an ``OFFSET 0`` fence, by key,
    with ``where`` checked on them, in a statement that reuses its plan
    (:meth:`SqlExecutor.run_reusing_plan`): without the fence a plan made without values
    could walk an owner's rows by the owner index instead.
    """
    rows: list[Any] = []
    for chunk in _chunks(ids):
        marks = ", ".join("?" for _ in chunk)
        if fenced:
            found = db.run_reusing_plan(
                f"SELECT {columns} FROM (SELECT * FROM memories WHERE id IN ({marks}) "
                f"OFFSET 0) m {join} WHERE {where}",
                [*chunk, *params],
            )
        else:
            found = db.run(
                f"SELECT {columns} FROM memories m {join} WHERE m.id IN ({marks}) AND {where}",
                [*chunk, *params],
            )
        rows.extend(found.fetchall())
    return rows


def memory_by_id(id_expression: str, *, fenced: bool) -> str:
    """The join of the memory row ``m`` of an id a statement already holds.

    ``fenced`` (PostgreSQL) puts the row behind ``OFFSET 0``, so the filter on it cannot
    become a way in: a plan reused across owners would otherwise read a large owner's rows
    by the owner index, priced for an average one.
    """
    if fenced:
        return f"CROSS JOIN LATERAL (SELECT * FROM memories WHERE id = {id_expression} OFFSET 0) m"
    return f"JOIN memories m ON m.id = {id_expression}"


def _real(value: Any) -> float | None:
    return None if value is None else float(value)


def _common_threshold(docs: int, share: float, at_least: int) -> int:
    """Memories a term must be in to be common among ``docs``: ``share`` of them and at
    least ``at_least``."""
    # Rounded first: 0.07 * 100 is 7.000000000000001, and 7 memories are 7%.
    return max(at_least, math.ceil(round(share * docs, 9)), 1)


def _frequency_counts(
    owner_sql: str, owner_params: list[Any], tokens: Sequence[int], cap: int | None
) -> tuple[str, list[Any]]:
    """``SELECT i, count`` rows for each of ``tokens`` (by position) among one owner's
    postings, each count stopped at ``cap`` when given."""
    # One index range per token; with ``cap`` it stops there, so a term in half the
    # memories costs no more to count than one in ``cap`` of them.
    limit, limit_params = (" LIMIT ?", [cap]) if cap is not None else ("", [])
    parts = " UNION ALL ".join(
        f"SELECT {i}, COUNT(*) FROM (SELECT 1 FROM memory_tokens WHERE {owner_sql} "
        f"AND token = ?{limit}) AS c{i}"
        for i in range(len(tokens))
    )
    return parts, [v for token in tokens for v in (*owner_params, token, *limit_params)]


def _owner_clause(account_id: str, user_id: str | None) -> tuple[str, list[Any]]:
    """The ``WHERE`` condition (and its values) of one owner: a user, or (``None``) the
    account's own memories."""
    owner_sql = "account_id = ?" + (" AND user_id = ?" if user_id is not None else "")
    return owner_sql, [account_id] + ([user_id] if user_id is not None else [])


def _chunks(items: Sequence[str], size: int = 500) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass(frozen=True, slots=True)
class LexicalTuning:
    """Thresholds of lexical search's caches and cuts (see :meth:`SqlStorage.lexical_search`).

    The defaults suit stores of any size; lower thresholds make a small store behave as a
    large one (as tests do to reach the caches with a few memories).
    """

    stats_ttl: float = 60.0
    """Seconds a cached document count or term count stays in use."""
    stats_min_cached: int = 1000
    """An owner's counts are cached once the owner has this many memories."""
    postings_budget: int = 3_000
    """Postings one query scores at most (the rarest terms are kept; a term that alone has
    more is scored on this many of its postings, see :attr:`sample_over_budget`). Chosen by
    leave-one-conversation-out on LoCoMo questions among 100k other memories of the same user
    (``bench/lexical_scale.py``; docs/retrieval.md): it bounds the slowest lexical searches,
    those of questions made of common words, for a held-out recall within 0.005 of 10,000's."""
    sample_over_budget: bool = True
    """When the rarest term of a question alone has more postings than the budget, score
    only ``postings_budget`` of them, those of the smallest memory ids: memory ids are
    random, so that is a fixed uniform sample, read in index order on SQLite. Off, such a
    term's postings are all scored (tens of thousands for a word in a tenth of a large
    owner's memories)."""
    common_min: int = 1000
    """A term is common (left out when rarer ones exist) above this many postings, or a
    fiftieth of the owner's memories when that is more."""
    document_frequencies_cached: int = 200_000
    """Term counts kept at most (the oldest go first)."""
    document_frequency_min_cached: int = 100
    """A term count is cached only from this many postings (rarer terms count fast)."""


class SqlStorage:
    """Reads shared by both backends; subclasses provide connections and the dialect."""

    def __init__(
        self, *, lexical: LexicalTuning | None = None, features: Sequence[Feature] = ()
    ) -> None:
        self._features = tuple(features)
        self.lexical = lexical or LexicalTuning()
        """When lexical search trusts a cached count (public: set it to tune a store)."""
        self._lexical_stats: dict[tuple[str, str | None], tuple[float, int, float]] = {}
        # (account, owner, token) -> (when counted, count, whether exact or a lower bound)
        self._document_frequency: OrderedDict[
            tuple[str, str | None, int], tuple[float, int, bool]
        ] = OrderedDict()
        self._stats_lock = threading.Lock()
        self._vectors_ready = False
        self.vector_opener: VectorOpener | None = None
        self._embedder_spec: str | object | None = _UNREAD

    name: ClassVar[str] = "sql"
    dialect: ClassVar[str] = "sqlite"
    reuses_plans: ClassVar[bool] = False
    """Whether the database may keep one plan for a statement of
    :meth:`SqlExecutor.run_reusing_plan` (PostgreSQL). Such statements then read the memory
    rows of the ids they hold behind a fence (:func:`memory_by_id`, :func:`select_ids_where`),
    so that a plan priced for an average owner still reads a large owner's rows by key."""

    @property
    def database(self) -> Database:
        """This storage is its own database seam (see :mod:`confide.storage.database`)."""
        return self

    # ---- provided by the backend -----------------------------------------------------------
    def _open_reader(self, account_id: str | None) -> AbstractContextManager[SqlExecutor]:
        """A read connection confined to ``account_id``'s rows where the database enforces
        row-level security, or (``None``) across accounts. Call it through
        :meth:`_reader` or :meth:`_reader_across_accounts`, which say which."""
        raise NotImplementedError

    def _reader(self, account_id: str) -> AbstractContextManager[SqlExecutor]:
        """A read connection confined to one account's rows (row-level security)."""
        return self._open_reader(account_id)

    def _reader_across_accounts(self) -> AbstractContextManager[SqlExecutor]:
        """A read connection that sees every account's rows: only for work that spans
        accounts by nature (schema and meta, purges, the job queue, upgrades); each use is
        listed in docs/security.md."""
        return self._open_reader(None)

    def transaction(self) -> AbstractContextManager[SqlTransaction]:
        """A write transaction: commits on normal exit, rolls back on any exception."""
        raise NotImplementedError

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend offers of :class:`Capability`."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections."""
        raise NotImplementedError

    def _vector_space_ddl(self, dims: int) -> Sequence[str]:
        return ()

    # ---- migrations --------------------------------------------------------------------------
    @property
    def features(self) -> tuple[Feature, ...]:
        """The features whose tables this store keeps, after the memory store's own."""
        return self._features

    def _apply_migrations(self, tx: SqlTransaction) -> None:
        tx.across_accounts()  # the schema, and data upgrades of every account
        tx.run(
            "CREATE TABLE IF NOT EXISTS feature_migrations (feature TEXT NOT NULL, "
            "version INTEGER NOT NULL, name TEXT NOT NULL, "
            "applied_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (feature, version))"
        )
        if tx.has_table("schema_migrations"):
            self._map_legacy_migrations(tx)
        done = {
            (str(r[0]), int(r[1]))
            for r in tx.run("SELECT feature, version FROM feature_migrations").fetchall()
        }
        for feature in (MEMORY_STORE, *self._features):
            for migration in feature.migrations:
                if (feature.name, migration.version) in done:
                    continue
                for statement in migration.statements(self.dialect):
                    self._run_migration_statement(tx, statement)
                tx.run(
                    "INSERT INTO feature_migrations (feature, version, name, applied_at) "
                    "VALUES (?, ?, ?, ?)",
                    [feature.name, migration.version, migration.name, time.time()],
                )

    def _map_legacy_migrations(self, tx: SqlTransaction) -> None:
        """Record the steps a store made with one numbered migration list had applied, as
        their features' steps, and drop that list (once: the same transaction drops it)."""
        applied = [int(r[0]) for r in tx.run("SELECT version FROM schema_migrations").fetchall()]
        now = time.time()
        names = {
            (feature.name, m.version): m.name
            for feature in (MEMORY_STORE, *self._features)
            for m in feature.migrations
        }
        for version in sorted(applied):
            for step in LEGACY_VERSIONS.get(version, ()):
                tx.run(
                    "INSERT INTO feature_migrations (feature, version, name, applied_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (feature, version) DO NOTHING",
                    [*step, names.get(step, f"schema-{version}"), now],
                )
        tx.run("DROP TABLE schema_migrations")

    def _run_migration_statement(self, tx: SqlTransaction, statement: str) -> None:
        tx.run(statement)

    def schema_versions(self) -> dict[str, int]:
        """The newest applied step of each feature, by name (the memory store's included)."""
        with self._reader_across_accounts() as db:
            rows = db.run(
                "SELECT feature, MAX(version) FROM feature_migrations GROUP BY feature"
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def meta_value(self, key: str) -> str | None:
        """A ``store_meta`` entry, if set."""
        with self._reader_across_accounts() as db:
            row = db.run("SELECT value FROM store_meta WHERE key = ?", [key]).fetchone()
        return None if row is None else str(row[0])

    def clear_key_rows(self, limit: int) -> list[MemoryRow]:
        """Up to ``limit`` memory versions whose key column is not blinded (an older store)."""
        return self._select_memories_across_accounts(
            "WHERE substr(m.key, 1, 2) <> ? ORDER BY m.id LIMIT ?", [BLIND_KEY_PREFIX, limit]
        )

    schema_lock_sql: ClassVar[str | None] = None
    """Run first in a transaction that changes the schema outside migrations (PostgreSQL: an
    advisory lock; SQLite's one writer needs none)."""

    def bind_embedder(self, model_id: str, dims: int) -> None:
        """Record the embedder (``model_id:dims``) and create its vector index if needed.

        Raises :class:`EmbedderMismatchError` when the store was built with another embedder.
        """
        spec = f"{model_id}:{dims}"
        with self.transaction() as tx:
            tx.across_accounts()  # the store's meta and the vector table's schema
            if self.schema_lock_sql is not None:
                # Processes starting together would each create the vector table and its
                # policy: one at a time, the later ones find them made.
                tx.run(self.schema_lock_sql)
            row = tx.run("SELECT value FROM store_meta WHERE key = 'embedder'").fetchone()
            if row is not None and row[0] != spec:
                raise EmbedderMismatchError(
                    f"this store was indexed with embedder {row[0]}, not {spec}; "
                    "run 'confide reindex' to re-embed every memory with the new one"
                )
            if row is None:
                tx.run("INSERT INTO store_meta (key, value) VALUES ('embedder', ?)", [spec])
            self._embedder_spec = spec
            for statement in self._vector_space_ddl(dims):
                tx.run(statement)

    def embedder_spec(self) -> str | None:
        """The bound embedder (``model_id:dims``), if any.

        Read once, then kept: every write of an engine without vectors asks it, and binding
        an embedder (``confide reindex``, or :meth:`bind_embedder` here) is what changes it.
        """
        if self._embedder_spec is _UNREAD:
            with self._reader_across_accounts() as db:
                row = db.run("SELECT value FROM store_meta WHERE key = 'embedder'").fetchone()
            self._embedder_spec = None if row is None else str(row[0])
        return self._embedder_spec  # type: ignore[return-value]

    def clear_vectors(self, limit: int) -> list[tuple[str, str, str, str, Vector]]:
        """None here: this store keeps its vectors in clear by design (see SQLite's)."""
        return []

    def bind_vector_opener(self, opener: VectorOpener) -> None:
        """Keep ``opener`` for sealed embeddings (only a store that seals them uses it)."""
        self.vector_opener = opener

    def unbind_embedder(self) -> None:
        """Forget the bound embedder and drop every stored vector (before a reindex)."""
        with self.transaction() as tx:
            tx.across_accounts()  # every account's vectors
            tx.run("DELETE FROM store_meta WHERE key = 'embedder'")
            self._embedder_spec = None
            if tx.has_table("embeddings"):
                tx.run("DELETE FROM embeddings")
            if tx.has_table("vector_snapshots"):
                tx.run("DELETE FROM vector_snapshots")

    # ---- reads -------------------------------------------------------------------------------
    def _select_memories(
        self, tail: str, params: Sequence[Any], account_id: str
    ) -> list[MemoryRow]:
        """``SELECT <memory columns> FROM memories m <tail>``, read as ``account_id``."""
        with self._reader(account_id) as db:
            rows = db.run(f"SELECT {MEMORY_SELECT} FROM memories m {tail}", params).fetchall()
        return [memory_row(r) for r in rows]

    def _select_memories_across_accounts(self, tail: str, params: Sequence[Any]) -> list[MemoryRow]:
        """``SELECT <memory columns> FROM memories m <tail>`` over every account's rows."""
        with self._reader_across_accounts() as db:
            rows = db.run(f"SELECT {MEMORY_SELECT} FROM memories m {tail}", params).fetchall()
        return [memory_row(r) for r in rows]

    def get_memory(self, account_id: str, memory_id: str) -> MemoryRow | None:
        """One version by id, within an account."""
        rows = self._select_memories(
            "WHERE m.id = ? AND m.account_id = ?", [memory_id, account_id], account_id
        )
        return rows[0] if rows else None

    def get_memories(self, account_id: str, memory_ids: Sequence[str]) -> list[MemoryRow]:
        """Several versions by id, within an account (order not guaranteed)."""
        with self._reader(account_id) as db:
            rows = select_ids_where(
                db,
                MEMORY_SELECT,
                memory_ids,
                "m.account_id = ?",
                [account_id],
                fenced=self.reuses_plans,
            )
        return [memory_row(r) for r in rows]

    def filter_memories(self, flt: MemoryFilter, memory_ids: Sequence[str]) -> list[MemoryRow]:
        """Those of ``memory_ids`` that match ``flt`` (the filter runs in the database)."""
        where, params = compile_filter(flt)
        with self._reader(flt.account_id) as db:
            rows = select_ids_where(
                db, MEMORY_SELECT, memory_ids, where, params, fenced=self.reuses_plans
            )
        return [memory_row(r) for r in rows]

    def has_others_shared(self, flt: MemoryFilter) -> bool:
        """Whether ``include_shared`` would reach any other user's memory at all.

        Callers that run several queries for one request ask once and drop the shared half
        of every query when the answer is no (the common case).
        """
        if not flt.include_shared or flt.user_id is None:
            return False
        where, params = compile_others_shared(flt)
        with self._reader(flt.account_id) as db:
            # The shared rows' partial index is the way in whatever the values.
            row = db.run_reusing_plan(
                f"SELECT 1 FROM memories m WHERE {where} LIMIT 1", params
            ).fetchone()
        return row is not None

    def touch(self, account_id: str, memory_ids: Sequence[str], when: float) -> None:
        """Set ``last_accessed_at`` (bookkeeping: no history, no change log)."""
        with self.transaction() as tx:
            tx.scope_to(account_id)
            for chunk in _chunks(memory_ids):
                marks = ", ".join("?" for _ in chunk)
                # The count feeds consolidation's "most retrieved" candidates.
                tx.run(
                    f"UPDATE memories SET last_accessed_at = ?, access_count = access_count + 1 "
                    f"WHERE account_id = ? AND id IN ({marks})",
                    [when, account_id, *chunk],
                )

    def find_by_key(
        self, account_id: str, user_id: str, key: str, states: Sequence[str]
    ) -> MemoryRow | None:
        """The newest head version with this key (case-insensitive) in the given states."""
        marks = ", ".join("?" for _ in states)
        with self._reader(account_id) as db:
            row = db.run(
                f"SELECT {MEMORY_SELECT} FROM memories m WHERE m.account_id = ? "
                f"AND m.user_id = ? AND m.key_lc = ? AND m.state IN ({marks}) "
                "ORDER BY m.updated_at DESC LIMIT 1",
                [account_id, user_id, key.lower(), *states],
            ).fetchone()
        return memory_row(row) if row else None

    def list_memories(self, flt: MemoryFilter, page: Page) -> list[MemoryRow]:
        """Memory versions matching every filter, applied in the database."""
        parts = [compile_filter(flt)]
        if flt.include_shared and flt.user_id is not None:
            parts = [
                compile_filter(flt.model_copy(update={"include_shared": False})),
                compile_others_shared(flt),
            ]
        order = "DESC" if page.newest_first else "ASC"
        window = page.limit + page.offset
        rows: list[MemoryRow] = []
        with self._reader(flt.account_id) as db:
            for where, params in parts:
                rows.extend(
                    memory_row(r)
                    for r in db.run(
                        f"SELECT {MEMORY_SELECT} FROM memories m WHERE {where} "
                        f"ORDER BY m.updated_at {order}, m.id {order} LIMIT ?",
                        [*params, window],
                    ).fetchall()
                )
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=page.newest_first)
        return rows[page.offset : page.offset + page.limit]

    def count_memories(self, flt: MemoryFilter) -> int:
        """How many versions match the filter."""
        where, params = compile_filter(flt)
        with self._reader(flt.account_id) as db:
            row = db.run(f"SELECT COUNT(*) FROM memories m WHERE {where}", params).fetchone()
        return int(row[0])

    def iter_owner(self, account_id: str, user_id: str) -> Iterator[MemoryRow]:
        """Every version one user owns, oldest first."""
        return iter(
            self._select_memories(
                "WHERE m.account_id = ? AND m.user_id = ? ORDER BY m.created_at, m.version",
                [account_id, user_id],
                account_id,
            )
        )

    def lineage(self, account_id: str, lineage_id: str) -> list[MemoryRow]:
        """All versions of one memory, oldest first."""
        return self._select_memories(
            "WHERE m.account_id = ? AND m.lineage_id = ? ORDER BY m.version",
            [account_id, lineage_id],
            account_id,
        )

    def history(self, account_id: str, lineage_id: str) -> list[HistoryRow]:
        """Audit events of every version of a memory, newest first."""
        with self._reader(account_id) as db:
            rows = db.run(
                "SELECT id, account_id, user_id, memory_id, lineage_id, event, old_ref, new_ref, "
                "actor, meta, ts FROM history WHERE account_id = ? AND lineage_id = ? "
                "ORDER BY id DESC",
                [account_id, lineage_id],
            ).fetchall()
        return [HistoryRow(*r) for r in rows]

    def owner_history(self, account_id: str, user_id: str) -> list[HistoryRow]:
        """Audit events of every memory one user owns, oldest first (for their export)."""
        with self._reader(account_id) as db:
            rows = db.run(
                "SELECT id, account_id, user_id, memory_id, lineage_id, event, old_ref, new_ref, "
                "actor, meta, ts FROM history WHERE account_id = ? AND user_id = ? ORDER BY id",
                [account_id, user_id],
            ).fetchall()
        return [HistoryRow(*r) for r in rows]

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
        account, or (``account_id=None``, an inspection of the whole thread) of every account.
        """
        sql = (
            "SELECT thread_id, rev, memory_id, event, meta, ts, account_id FROM changes "
            "WHERE thread_id = ? AND rev > ?"
        )
        params: list[Any] = [thread_id, rev]
        if upto is not None:
            sql += " AND rev <= ?"
            params.append(upto)
        if account_id is not None:
            sql += " AND account_id = ?"
            params.append(account_id)
        with self._thread_reader(account_id) as db:
            rows = db.run(sql + " ORDER BY rev DESC LIMIT ?", [*params, limit]).fetchall()
        return [ChangeRow(*r) for r in rows]

    def current_rev(self, thread_id: str, *, account_id: str | None) -> int:
        """The thread's revision (0 when nothing was written), read as one account or
        (``account_id=None``, an inspection) across accounts."""
        sql = "SELECT rev FROM threads WHERE thread_id = ?"
        params = [thread_id]
        if account_id is not None:
            sql += " AND account_id = ?"
            params.append(account_id)
        with self._thread_reader(account_id) as db:
            row = db.run(sql, params).fetchone()
        return int(row[0]) if row else 0

    def _thread_reader(self, account_id: str | None) -> AbstractContextManager[SqlExecutor]:
        if account_id is None:
            return self._reader_across_accounts()
        return self._reader(account_id)

    def unseen(self, account_id: str, thread_id: str, reader: str) -> bool:
        """Whether the account's thread has a revision ``reader`` has not seen (one read, no
        lock)."""
        with self._reader(account_id) as db:
            row = db.run_reusing_plan(
                "SELECT t.rev > COALESCE((SELECT r.seen_rev FROM thread_reads r "
                "WHERE r.thread_id = t.thread_id AND r.reader = ?), 0) "
                "FROM threads t WHERE t.thread_id = ? AND t.account_id = ?",
                [reader, thread_id, account_id],
            ).fetchone()
        return bool(row[0]) if row else False

    def key_generation(self, account_id: str, user_id: str) -> int:
        """The user's current key generation, recorded (as 0) when the user has none yet.

        The row must exist before the user's first write: writers lock it (``FOR SHARE``)
        so that an erasure, which bumps it, waits for them, and they for it.
        """
        with self._reader(account_id) as db:
            row = db.run(
                "SELECT generation FROM key_generations WHERE account_id = ? AND user_id = ?",
                [account_id, user_id],
            ).fetchone()
        if row is not None:
            return int(row[0])
        with self.transaction() as tx:
            tx.scope_to(account_id)
            tx.run(
                "INSERT INTO key_generations (account_id, user_id, generation) "
                "VALUES (?, ?, 0) ON CONFLICT DO NOTHING",
                [account_id, user_id],
            )
            found = tx.key_generation(account_id, user_id)
        return 0 if found is None else found

    def legacy_data_keys(self) -> list[DataKeyRow]:
        """Wrapped keys kept in the data database by stores made before the key store."""
        with self._reader_across_accounts() as db:
            rows = db.run(
                "SELECT account_id, user_id, purpose, key_id, wrapped, kek_id, created_at "
                "FROM data_keys ORDER BY account_id, user_id, purpose"
            ).fetchall()
        return [_data_key(r) for r in rows]

    def drop_legacy_data_keys(self) -> None:
        """Delete the keys :meth:`legacy_data_keys` returned (once they are in the key store)."""
        with self.transaction() as tx:
            tx.across_accounts()  # the move of every account's keys to the key store
            tx.run("DELETE FROM data_keys")

    def reader(self, account_id: str) -> AbstractContextManager[SqlExecutor]:
        """A connection for reads of one account's rows (the service, app, checkpoint and
        message tables share it), confined to them where the database enforces row-level
        security."""
        return self._reader(account_id)

    def reader_across_accounts(self) -> AbstractContextManager[SqlExecutor]:
        """A connection for reads that span accounts by nature: the key store, the job
        queue, API key lookups before an account is known, upgrades of an older store.
        Each use is listed in docs/security.md."""
        return self._reader_across_accounts()

    def user_ids(self, account_id: str, *, limit: int = 1000) -> list[str]:
        """See :meth:`Storage.user_ids`."""
        with self._reader(account_id) as db:
            rows = db.run(
                "SELECT DISTINCT user_id FROM memories WHERE account_id = ? AND state <> ? "
                "ORDER BY user_id LIMIT ?",
                [account_id, MemoryState.PURGED.value, limit],
            ).fetchall()
        return [str(r[0]) for r in rows]

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Make deleted rows unrecoverable from the database's files (per backend)."""
        raise NotImplementedError

    def due_for_purge(self, now: float, limit: int) -> list[MemoryRow]:
        """Soft-deleted heads whose ``purge_at`` has passed (of every account)."""
        return self._select_memories_across_accounts(
            "WHERE m.state = 'soft_deleted' AND m.purge_at IS NOT NULL AND m.purge_at <= ? "
            "ORDER BY m.purge_at LIMIT ?",
            [now, limit],
        )

    def due_for_ttl(
        self, now: float, *, idle_before: float, importance_below: int, limit: int
    ) -> list[MemoryRow]:
        """See :meth:`Storage.due_for_ttl` (the hourly sweep spans accounts)."""
        return self._select_memories_across_accounts(
            "WHERE m.state = 'active' AND ((m.expires_at IS NOT NULL AND m.expires_at <= ?) "
            "OR (m.pinned = ? AND m.importance < ? AND m.updated_at < ? "
            "AND (m.last_accessed_at IS NULL OR m.last_accessed_at < ?))) "
            "ORDER BY m.updated_at LIMIT ?",
            [now, False, importance_below, idle_before, idle_before, limit],
        )

    def scope_memory_ids(
        self, account_id: str, user_id: str | None, agent_id: str | None
    ) -> list[str]:
        """Ids of every version in a scope (for an admin purge)."""
        sql = "SELECT id FROM memories WHERE account_id = ?"
        params: list[Any] = [account_id]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        if agent_id is not None:
            sql += " AND agent_id = ?"
            params.append(agent_id)
        with self._reader(account_id) as db:
            return [str(r[0]) for r in db.run(sql, params).fetchall()]

    def op_counts(
        self,
        *,
        by: str,
        since: float | None,
        until: float | None,
        account_id: str | None = None,
    ) -> dict[str, int]:
        """Operational events counted by ``op``, ``node`` or ``status`` in a time window,
        of one account when ``account_id`` is given (else of every account)."""
        if by not in ("op", "node", "status"):
            raise ValueError("by must be 'op', 'node' or 'status'")
        sql = f"SELECT {by}, COUNT(*) FROM ops_events WHERE 1 = 1"
        params: list[Any] = []
        if account_id is not None:
            sql += " AND account_id = ?"
            params.append(account_id)
        if since is not None:
            sql += " AND ts >= ?"
            params.append(since)
        if until is not None:
            sql += " AND ts < ?"
            params.append(until)
        reader = (
            self._reader(account_id) if account_id is not None else self._reader_across_accounts()
        )
        with reader as db:
            rows = db.run(sql + f" GROUP BY {by}", params).fetchall()
        return {str(k): int(v) for k, v in rows}

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
        sql = (
            "SELECT account_id, user_id, thread_id, node, op, status, memory_id, category, sim, "
            "ts FROM ops_events WHERE account_id = ?"
        )
        params: list[Any] = [account_id]
        for column, value in (("node", node), ("op", op)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        if since is not None:
            sql += " AND ts >= ?"
            params.append(since)
        with self._reader(account_id) as db:
            rows = db.run(sql + " ORDER BY ts, id LIMIT ?", [*params, limit]).fetchall()
        return [
            OpRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], _real(r[8]), float(r[9]))
            for r in rows
        ]

    def count_rows(self, table: str, account_id: str, user_id: str) -> int:
        """Rows of one user in a table (for tests and receipts)."""
        if table not in (
            "memories",
            "history",
            "memory_tokens",
            "relations",
            "embeddings",
            "data_keys",
            "user_keys",
            "ops_events",
            "messages",
            "conversation_summaries",
            "checkpoints",
            "checkpoint_blobs",
            "checkpoint_writes",
            "supervisor_checkpoints",
            "consolidation_pairs",
        ):
            raise ValueError(f"unknown table {table}")
        with self._reader(account_id) as db:
            if table == "embeddings" and not self._has_vectors(db):
                return 0
            row = db.run(
                f"SELECT COUNT(*) FROM {table} WHERE account_id = ? AND user_id = ?",
                [account_id, user_id],
            ).fetchone()
        return int(row[0])

    def _has_table(self, db: SqlExecutor, name: str) -> bool:
        raise NotImplementedError

    def _has_vectors(self, db: SqlExecutor) -> bool:
        """Whether the ``embeddings`` table exists (made when an embedder is first bound).

        It is never dropped, so a yes is remembered and vector reads skip the catalogue.
        """
        if not self._vectors_ready:
            self._vectors_ready = self._has_table(db, "embeddings")
        return self._vectors_ready

    # ---- retrieval primitives ---------------------------------------------------------------
    def _owner_stats(
        self, db: SqlExecutor, account_id: str, user_id: str | None
    ) -> tuple[int, float]:
        """``(documents, average length)`` of an owner's token index.

        BM25 needs both; for a large owner they move slowly, so a value up to a minute old
        ranks the same and saves a scan of the owner's tokens on every query.
        """
        now = time.monotonic()
        cached = self._lexical_stats.get((account_id, user_id))
        if cached is not None and now - cached[0] < self.lexical.stats_ttl:
            return cached[1], cached[2]
        owner_sql, params = _owner_clause(account_id, user_id)
        # Both in one statement (one round trip to a server); average length: a sample of
        # postings, which is all BM25's length normalisation needs.
        row = db.run(
            f"SELECT (SELECT COUNT(*) FROM memories WHERE {owner_sql} AND state = 'active'), "
            "(SELECT AVG(doc_len) FROM "
            f"(SELECT doc_len FROM memory_tokens WHERE {owner_sql} LIMIT 5000) sample)",
            [*params, *params],
        ).fetchone()
        docs, avg_len = int(row[0]), float(row[1] or 1.0)
        if docs >= self.lexical.stats_min_cached:  # small owners are cheap to recount
            with self._stats_lock:
                self._lexical_stats[(account_id, user_id)] = (now, docs, avg_len)
        return docs, avg_len

    def lexical_search(
        self, flt: MemoryFilter, tokens: Sequence[int], k: int, *, k1: float, b: float
    ) -> list[ScoredId]:
        """The ``k`` best memories by BM25 over blind ``tokens`` among those matching ``flt``.

        For one user, the user's best postings are scored on their own (an index-only read)
        and checked against the filter in the same statement, and the hits carry their rows;
        when a selective filter leaves too few, the filter joins the postings instead.
        Shared memories of other users and account-wide queries always take the joined path.
        """
        unique = list(dict.fromkeys(tokens))
        if not unique or k <= 0:
            return []
        owner = flt.user_id
        with self._reader(flt.account_id) as db:
            docs, avg_len = self._owner_stats(db, flt.account_id, owner)
            if docs == 0 and not flt.include_shared:
                return []
            idf, sample = self._idf(db, flt.account_id, owner, unique, docs)
            shared_idf = idf
            if owner is not None and flt.include_shared and len(idf) < len(unique):
                # Words the asker never used (or uses everywhere) still find other users'
                # shared memories, weighed by how often those memories use them.
                unseen = [t for t in unique if t not in idf]
                shared_idf = {**idf, **self._others_shared_idf(db, flt, unseen, docs)}
            if not shared_idf:
                return []
            if owner is None:
                score = self._bm25_expression(idf, k1=k1, b=b, avg_len=avg_len)
                return self._joined(db, compile_filter(flt), flt.account_id, score, idf, k)
            hits: list[ScoredId] = []
            if idf:
                score = self._bm25_expression(idf, k1=k1, b=b, avg_len=avg_len)
                hits = self._owner_postings(db, flt, score, idf, k, sample=sample)
            if flt.include_shared:
                shared_score = self._bm25_expression(shared_idf, k1=k1, b=b, avg_len=avg_len)
                hits += self._joined(
                    db, compile_others_shared(flt), flt.account_id, shared_score, shared_idf, k
                )
                hits.sort(key=lambda h: (-h.score, h.memory_id))
        return hits[:k]

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
        ``at_least`` of them.

        Counted as lexical search counts (and from the same caches): each count stops once
        it reaches the threshold, so a term in half of a million memories costs no more than
        a rare one.
        """
        unique = list(dict.fromkeys(tokens))
        if not unique:
            return set()
        with self._reader(account_id) as db:
            if (account_id, user_id) not in self._lexical_stats:
                # Never counted large: most likely a small owner, whose figures are not
                # cached. Its document count and the terms' counts come in one read (this
                # runs before the question is embedded), each term counted up to a cap no
                # threshold of a small owner exceeds.
                small = self.lexical.stats_min_cached
                cap = max(small, at_least)
                docs, df = self._documents_and_frequencies(
                    db, account_id, user_id, unique, small=small, cap=cap
                )
                if docs < small:
                    need = _common_threshold(docs, share, at_least)
                    return {t for t, n in df.items() if n >= need} if docs >= need else set()
            return self._counted_common_tokens(
                db, account_id, user_id, unique, share=share, at_least=at_least
            )

    def _counted_common_tokens(
        self,
        db: SqlExecutor,
        account_id: str,
        user_id: str | None,
        tokens: list[int],
        *,
        share: float,
        at_least: int,
    ) -> set[int]:
        """The common-term check from the owner's BM25 figures (cached for a large owner),
        then the terms' counts, each stopped at the threshold (cached likewise)."""
        docs, _ = self._owner_stats(db, account_id, user_id)
        need = _common_threshold(docs, share, at_least)
        if docs < need:
            return set()
        cache = docs >= self.lexical.stats_min_cached
        df = self._document_frequencies(db, account_id, user_id, tokens, cache=cache, cap=need)
        return {token for token, n in df.items() if n >= need}

    def _documents_and_frequencies(
        self,
        db: SqlExecutor,
        account_id: str,
        owner: str | None,
        tokens: list[int],
        *,
        small: int,
        cap: int,
    ) -> tuple[int, dict[int, int]]:
        """The owner's document count (at most ``small``: a larger owner's is not read in
        full here) and each token's postings (at most ``cap``), read together, never cached."""
        owner_sql, owner_params = _owner_clause(account_id, owner)
        counts, params = _frequency_counts(owner_sql, owner_params, tokens, cap)
        rows = db.run(
            f"SELECT -1, COUNT(*) FROM (SELECT 1 FROM memories WHERE {owner_sql} "
            f"AND state = 'active' LIMIT ?) AS documents UNION ALL {counts}",
            [*owner_params, small, *params],
        ).fetchall()
        found = {int(i): int(n) for i, n in rows}
        return found.pop(-1), {tokens[i]: n for i, n in found.items()}

    def _others_shared_idf(
        self, db: SqlExecutor, flt: MemoryFilter, tokens: list[int], owner_docs: int
    ) -> dict[int, float]:
        """IDF of ``tokens`` over the owner's memories and the others' shared ones in scope.

        Counted over exactly the memories the shared half of a search may return, so no
        other user's private memory weighs on the ranking.
        """
        where, params = compile_others_shared(flt)
        marks = ", ".join("?" for _ in tokens)
        counted = db.run(
            "SELECT t.token, COUNT(*) FROM memories m CROSS JOIN memory_tokens t "
            f"WHERE t.memory_id = m.id AND t.account_id = ? AND t.token IN ({marks}) "
            f"AND {where} GROUP BY t.token",
            [flt.account_id, *tokens, *params],
        ).fetchall()
        df = {int(tok): int(n) for tok, n in counted if int(n) > 0}
        if not df:
            return {}
        shared_docs = int(
            db.run(f"SELECT COUNT(*) FROM memories m WHERE {where}", params).fetchone()[0]
        )
        docs = max(owner_docs + shared_docs, 1)
        return {tok: float(np.log(1.0 + (docs - n + 0.5) / (n + 0.5))) for tok, n in df.items()}

    def _idf(
        self,
        db: SqlExecutor,
        account_id: str,
        owner: str | None,
        tokens: list[int],
        docs: int,
    ) -> tuple[dict[int, float], int | None]:
        """BM25 weights of the terms a search scores, and how many postings of the one term
        it scores when that term alone has more than the budget (``None``: all of them)."""
        cache = docs >= self.lexical.stats_min_cached
        docs = max(docs, 1)
        # Terms in more than a fiftieth of the owner's memories add little to BM25 but
        # dominate its cost (long posting lists); leave them out when rarer ones exist. Only
        # whether a term is that common matters then, so its count stops there.
        common = max(self.lexical.common_min, docs // 50)
        df = self._document_frequencies(db, account_id, owner, tokens, cache=cache, cap=common + 1)
        kept = {tok: n for tok, n in df.items() if 0 < n <= common}
        if not kept:  # only common terms: weigh them by their full counts
            capped = [tok for tok, n in df.items() if n > common]
            if capped:
                df.update(self._document_frequencies(db, account_id, owner, capped, cache=cache))
            kept = {tok: n for tok, n in df.items() if n > 0}
        # A question made only of common words ("where has Maria made friends") would still
        # score tens of thousands of postings; the rarest terms up to a budget rank nearly the
        # same. (An owner of fewer than a few thousand memories never reaches the budget.)
        budget = self.lexical.postings_budget
        if sum(kept.values()) > budget:
            chosen: dict[int, int] = {}
            for tok, n in sorted(kept.items(), key=lambda item: item[1]):
                if chosen and sum(chosen.values()) + n > budget:
                    break
                chosen[tok] = n
            kept = chosen
        # Only the first term chosen can exceed the budget, and then it is chosen alone. Its
        # weight still comes from its full count; only which memories are scored shrinks.
        over = self.lexical.sample_over_budget and sum(kept.values()) > budget
        idf = {tok: float(np.log(1.0 + (docs - n + 0.5) / (n + 0.5))) for tok, n in kept.items()}
        return idf, budget if over else None

    def _document_frequencies(
        self,
        db: SqlExecutor,
        account_id: str,
        owner: str | None,
        tokens: list[int],
        cache: bool,
        cap: int | None = None,
    ) -> dict[int, int]:
        """How many of the owner's memories hold each token (at most ``cap``, when given).

        Counting a common term's postings is the slowest part of a lexical search, and for a
        large owner a count of at least :attr:`LexicalTuning.document_frequency_min_cached`
        up to :attr:`LexicalTuning.stats_ttl` old ranks the same (like the document count), so such
        counts are kept that long. Rarer terms are counted every time: a memory stored a
        moment ago must be found by its words. With ``cap``, each count stops at ``cap``
        postings; a count that reached it is kept as a lower bound, which answers later
        capped counts but never a call that needs the exact figure.
        """
        now = time.monotonic()
        df: dict[int, int] = {}
        if cache:
            with self._stats_lock:
                for token in tokens:
                    hit = self._document_frequency.get((account_id, owner, token))
                    if hit is None or now - hit[0] >= self.lexical.stats_ttl:
                        continue
                    if hit[2] or (cap is not None and hit[1] >= cap):
                        df[token] = hit[1]
        missing = [t for t in tokens if t not in df]
        if not missing:
            return df
        parts, params = _frequency_counts(*_owner_clause(account_id, owner), missing, cap)
        counted = {
            missing[int(i)]: int(n) for i, n in db.run_reusing_plan(parts, params).fetchall()
        }
        if cache:
            with self._stats_lock:
                for token, n in counted.items():
                    if n < self.lexical.document_frequency_min_cached:
                        continue  # rare terms count fast, and a new memory must count at once
                    exact = cap is None or n < cap
                    self._document_frequency[(account_id, owner, token)] = (now, int(n), exact)
                    self._document_frequency.move_to_end((account_id, owner, token))
                while len(self._document_frequency) > self.lexical.document_frequencies_cached:
                    self._document_frequency.popitem(last=False)
        df.update(counted)
        return df

    @staticmethod
    def _bm25_expression(
        idf: dict[int, float], *, k1: float, b: float, avg_len: float
    ) -> Bm25Score:
        weights = " ".join("WHEN ? THEN ?" for _ in idf)
        params: list[Any] = [v for tok, w in idf.items() for v in (tok, w)]
        posting = (
            f"(CASE t.token {weights} ELSE 0 END) * t.tf * ? "
            "/ (t.tf + ? * (1 - ? + ? * t.doc_len / ?))"
        )
        params += [k1 + 1.0, k1, b, b, max(avg_len, 1.0)]
        if len(idf) == 1:
            return Bm25Score(posting, params, "")
        return Bm25Score(f"SUM({posting})", params, "GROUP BY t.memory_id")

    def _owner_postings(
        self,
        db: SqlExecutor,
        flt: MemoryFilter,
        score: Bm25Score,
        idf: dict[int, float],
        k: int,
        *,
        sample: int | None = None,
    ) -> list[ScoredId]:
        """The owner's best ``k`` memories by BM25 that pass ``flt``, with their rows; with
        ``sample``, only that many postings are scored, those of the smallest memory ids."""
        marks = ", ".join("?" for _ in idf)
        own = compile_filter(flt.model_copy(update={"include_shared": False}))
        where, params = own
        limit = 4 * k + 16
        owner_params = [flt.account_id, flt.user_id, *idf]
        if sample is None:
            scored = (
                f"memory_tokens t WHERE t.account_id = ? AND t.user_id = ? AND t.token IN ({marks})"
            )
        else:
            # The same postings on both stores. SQLite reads them in its primary key's order
            # (no sort); PostgreSQL reads the term's range of its owner index and keeps the
            # smallest ids (``token`` first, so that no index orders by id alone and a plan
            # cannot walk the memory_id key instead, filtering as it goes).
            scored = (
                "(SELECT memory_id, tf, doc_len, token FROM memory_tokens WHERE account_id = ? "
                f"AND user_id = ? AND token IN ({marks}) ORDER BY token, memory_id LIMIT ?) t"
            )
            owner_params.append(sample)
        postings = (
            f"SELECT t.memory_id, {score.sql} AS score FROM {scored} "
            f"{score.group_by} ORDER BY score DESC, t.memory_id LIMIT ?"
        )
        postings_params = [*score.params, *owner_params, limit]
        # The owner's best postings (an index-only read) and the filter on their rows in one
        # statement; the rows come back for the caller to decrypt.
        rows = db.run_reusing_plan(
            f"SELECT s.score, {MEMORY_SELECT} FROM ({postings}) s "
            f"{memory_by_id('s.memory_id', fenced=self.reuses_plans)} WHERE {where} "
            "ORDER BY s.score DESC, s.memory_id LIMIT ?",
            [*postings_params, *params, k],
        ).fetchall()
        hits = [ScoredId(str(r[1]), float(r[0]), memory_row(r[1:])) for r in rows]
        if len(hits) >= k:
            return hits
        if len(db.run_reusing_plan(postings, postings_params).fetchall()) < limit:
            return hits  # every posting was considered
        # Most of the best postings fail the filter (a selective one): join it instead.
        return self._joined(db, own, flt.account_id, score, idf, k)

    @staticmethod
    def _joined(
        db: SqlExecutor,
        compiled: tuple[str, list[Any]],
        account_id: str,
        score: Bm25Score,
        idf: dict[int, float],
        k: int,
    ) -> list[ScoredId]:
        where, params = compiled
        marks = ", ".join("?" for _ in idf)
        rows = db.run(
            # Memories first (CROSS JOIN fixes SQLite's join order): this path serves
            # selective filters and other users' shared memories, both narrow on that side.
            f"SELECT t.memory_id, {score.sql} AS score FROM memories m "
            f"CROSS JOIN memory_tokens t WHERE t.memory_id = m.id "
            f"AND t.account_id = ? AND t.token IN ({marks}) AND {where} "
            f"{score.group_by} ORDER BY score DESC, t.memory_id LIMIT ?",
            [*score.params, account_id, *idf, *params, k],
        ).fetchall()
        return [ScoredId(str(r[0]), float(r[1])) for r in rows]

    def edges(self, account_id: str, memory_ids: Sequence[str]) -> list[EdgeRow]:
        """Edges touching any of ``memory_ids``, in either direction."""
        found: dict[tuple[str, str], EdgeRow] = {}
        with self._reader(account_id) as db:
            for chunk in _chunks(memory_ids):
                marks = ", ".join("?" for _ in chunk)
                for r in db.run_reusing_plan(
                    "SELECT from_id, to_id, relation_type, strength FROM relations "
                    f"WHERE account_id = ? AND (from_id IN ({marks}) OR to_id IN ({marks}))",
                    [account_id, *chunk, *chunk],
                ).fetchall():
                    found[(r[0], r[1])] = EdgeRow(str(r[0]), str(r[1]), str(r[2]), float(r[3]))
        return list(found.values())

    def neighbourhood(
        self,
        flt: MemoryFilter,
        memory_ids: Sequence[str],
        vector: Vector | None,
        *,
        with_vectors: bool = False,
    ) -> Neighbourhood:
        """Edges touching ``memory_ids`` whose other end matches ``flt``, with those rows.

        ``memory_ids`` are taken to match the filter already (they are search results); the
        filter runs in the database on the other end of every edge. Two plain reads (the
        edges, then the rows across them) plan and run faster than one join per direction.
        """
        given = set(memory_ids)
        found = self.edges(flt.account_id, memory_ids)
        across = {e.to_id for e in found if e.from_id in given} | {
            e.from_id for e in found if e.to_id in given
        }
        with self._reader(flt.account_id) as db:
            column = self._neighbour_column(db, vector, with_vectors=with_vectors)
            found_rows = NeighbourRows(column.kind, self._decode_vector)
            where, params = compile_filter(flt)
            for chunk in _chunks(sorted(across)):
                marks = ", ".join("?" for _ in chunk)
                for r in db.run(
                    f"SELECT {column.select}, {MEMORY_SELECT} FROM memories m {column.join} "
                    f"WHERE m.id IN ({marks}) AND {where}",
                    [*column.params, *chunk, *params],
                ).fetchall():
                    found_rows.add(r[0], memory_row(r[1:]))
        rows, similarity, vectors = found_rows.rows, found_rows.similarity, found_rows.vectors
        edges = [
            e
            for e in found
            if (e.from_id in given and e.to_id in rows) or (e.to_id in given and e.from_id in rows)
        ]
        if rows and vector is not None and column.kind != "similarity":
            similarity = self.similarities(flt.account_id, list(rows), vector)
        elif rows and vector is None and with_vectors and column.kind != "vector":
            vectors = self.vectors(flt.account_id, list(rows))
        return Neighbourhood(edges, list(rows.values()), similarity, vectors)

    def _neighbour_column(
        self, db: SqlExecutor, vector: Vector | None, *, with_vectors: bool
    ) -> NeighbourColumn:
        """What the neighbourhood read selects beside each neighbour's row.

        By default nothing (NULL): :meth:`similarities` or :meth:`vectors` fill it in
        afterwards. A backend that computes cosine in SQL, or reads vectors cheaply in the
        same statement, joins its embeddings here instead.
        """
        return NO_NEIGHBOUR_COLUMN

    def vectors(self, account_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """Stored embeddings of these memory versions."""
        out: dict[str, Vector] = {}
        with self._reader(account_id) as db:
            if not self._has_vectors(db):
                return out
            for chunk in _chunks(memory_ids):
                marks = ", ".join("?" for _ in chunk)
                for r in db.run(
                    f"SELECT memory_id, {self._vector_select} FROM embeddings "
                    f"WHERE account_id = ? AND memory_id IN ({marks})",
                    [account_id, *chunk],
                ).fetchall():
                    out[str(r[0])] = self._decode_vector(r[1])
        return out

    def similarities(
        self, account_id: str, memory_ids: Sequence[str], vector: Vector
    ) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of these versions' embeddings."""
        q = np.asarray(vector, dtype=np.float32)
        return {i: float(v @ q) for i, v in self.vectors(account_id, memory_ids).items()}

    _vector_select: ClassVar[str] = "vector"

    @staticmethod
    def _decode_vector(value: Any) -> Vector:
        return np.frombuffer(bytes(value), dtype=np.float32)
