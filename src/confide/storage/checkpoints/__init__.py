"""LangGraph checkpoints as rows: sealed blobs beside the columns that place them.

Four tables (keyed by owner since the ``checkpoint-owners`` step). ``checkpoints`` holds one
row per checkpoint: its owner (account, user and agent: :class:`ThreadOwner`), thread, namespace,
id and parent in clear, the channel versions it references (channel names and version
counters: graph structure, no values) and the checkpoint with its metadata sealed.
``checkpoint_blobs`` holds each channel value once per version, sealed;
``checkpoint_writes`` the pending writes of a checkpoint, sealed; ``supervisor_checkpoints``
one row per ``(account_id, user_id, agent_id, thread_id)`` naming the thread's latest root
checkpoint. A thread belongs to its owner: two users (or two agents) of one account naming
the same ``thread_id`` keep two threads.

The caller (``confide.langgraph``) seals and opens; this module never sees plaintext. A put
is one transaction with its blobs, the latest-state row and the retention prune; SQL is
written once with ``?`` placeholders for both backends.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confide.storage.database import Database
from confide.storage.schema import Feature, Migration, account_policies, no_statistics

__all__ = [
    "CHECKPOINTS_FEATURE",
    "BlobRow",
    "CheckpointRow",
    "CheckpointTables",
    "SqlCheckpointTables",
    "ThreadOwner",
    "WriteRow",
]


@dataclass(frozen=True, slots=True)
class ThreadOwner:
    """Whose threads a call reaches: one user of an account, as one agent.

    Args:
        account_id: the account.
        user_id: the user; ``None`` (listing, deleting and pruning only): every user of the
            account.
        agent_id: the agent whose threads these are; ``""``: threads of no agent.
    """

    account_id: str
    user_id: str | None
    agent_id: str = ""

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition (``?`` placeholders) selecting this owner's rows, and its values."""
        if self.user_id is None:
            return "account_id = ? AND agent_id = ?", [self.account_id, self.agent_id]
        return (
            "account_id = ? AND user_id = ? AND agent_id = ?",
            [self.account_id, self.user_id, self.agent_id],
        )


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One checkpoint: where it sits in clear, the checkpoint and metadata sealed."""

    account_id: str
    user_id: str
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    channel_versions: dict[str, Any]
    created_at: float
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes
    agent_id: str = ""

    @property
    def owner(self) -> ThreadOwner:
        """The owner of the checkpoint's thread."""
        return ThreadOwner(self.account_id, self.user_id, self.agent_id)


@dataclass(frozen=True, slots=True)
class BlobRow:
    """One channel value at one version (``ciphertext`` empty for an empty channel)."""

    channel: str
    version: str
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes


@dataclass(frozen=True, slots=True)
class WriteRow:
    """One pending write of a task, at position ``idx`` (negative for special channels)."""

    checkpoint_id: str
    task_id: str
    idx: int
    channel: str
    task_path: str
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes


class CheckpointTables(Protocol):
    """Reads and writes of the checkpoint tables (``SqlCheckpointTables(storage.database)``).

    Every call names a :class:`ThreadOwner`; a call never reaches another owner's rows.
    Those that read or write one thread's checkpoints need the owner's user.
    """

    def put(self, row: CheckpointRow, blobs: Sequence[BlobRow], *, keep_last: int | None) -> None:
        """Store a checkpoint and its new blobs; update the latest-state row; prune."""
        ...

    def put_writes(
        self, owner: ThreadOwner, *, thread_id: str, checkpoint_ns: str, rows: Sequence[WriteRow]
    ) -> None:
        """Store writes; a write at a negative index replaces, others are kept once."""
        ...

    def get(
        self, owner: ThreadOwner, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> CheckpointRow | None:
        """One checkpoint, or the newest of the thread's namespace when no id is given."""
        ...

    def list_checkpoints(
        self,
        owner: ThreadOwner,
        *,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        before: str | None,
    ) -> list[CheckpointRow]:
        """Checkpoints newest first (by thread, then id descending)."""
        ...

    def blobs(
        self, owner: ThreadOwner, thread_id: str, checkpoint_ns: str, versions: dict[str, str]
    ) -> list[BlobRow]:
        """The blobs of the given channel versions that exist."""
        ...

    def writes(
        self, owner: ThreadOwner, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> list[WriteRow]:
        """A checkpoint's pending writes, by task and index."""
        ...

    def delete_thread(self, owner: ThreadOwner, thread_id: str) -> None:
        """Every checkpoint, blob, write and latest-state row of the owner's thread."""
        ...

    def latest(self, owner: ThreadOwner, thread_id: str) -> str | None:
        """The id of the thread's latest root checkpoint, from ``supervisor_checkpoints``."""
        ...

    def prune_thread(self, owner: ThreadOwner, thread_id: str, *, keep_last: int) -> None:
        """Keep the newest ``keep_last`` checkpoints of each of the thread's namespaces."""
        ...


_CP_COLUMNS = (
    "account_id, user_id, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "channel_versions, created_at, key_id, ciphertext, wrapped_key, agent_id"
)
# Where one thread namespace's rows are: the owner, thread and namespace (see ``_place``).
_PLACE = "account_id = ? AND user_id = ? AND agent_id = ? AND thread_id = ? AND checkpoint_ns = ?"


def _place(owner: ThreadOwner, thread_id: str, checkpoint_ns: str) -> list[Any]:
    if owner.user_id is None:
        raise ValueError("a thread's checkpoints are read and written for one user")
    return [owner.account_id, owner.user_id, owner.agent_id, thread_id, checkpoint_ns]


def _checkpoint(r: Sequence[Any]) -> CheckpointRow:
    return CheckpointRow(
        account_id=r[0],
        user_id=r[1],
        thread_id=r[2],
        checkpoint_ns=r[3],
        checkpoint_id=r[4],
        parent_checkpoint_id=r[5],
        channel_versions=json.loads(r[6]),
        created_at=float(r[7]),
        key_id=r[8],
        ciphertext=bytes(r[9]),
        wrapped_key=bytes(r[10]),
        agent_id=r[11],
    )


class SqlCheckpointTables:
    """:class:`CheckpointTables` on a SQL storage (SQLite or PostgreSQL)."""

    def __init__(self, storage: Database) -> None:
        self._storage = storage

    def put(self, row: CheckpointRow, blobs: Sequence[BlobRow], *, keep_last: int | None) -> None:
        """See :meth:`CheckpointTables.put`."""
        place = _place(row.owner, row.thread_id, row.checkpoint_ns)
        with self._storage.transaction() as tx:
            tx.scope_to(row.account_id)
            for blob in blobs:
                tx.run(
                    "INSERT INTO checkpoint_blobs (account_id, user_id, agent_id, thread_id, "
                    "checkpoint_ns, channel, version, key_id, ciphertext, wrapped_key) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [*place, blob.channel, blob.version, blob.key_id, blob.ciphertext,
                     blob.wrapped_key],
                )  # fmt: skip
            tx.run(
                f"INSERT INTO checkpoints ({_CP_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (account_id, user_id, agent_id, thread_id, checkpoint_ns, "
                "checkpoint_id) DO UPDATE SET "
                "parent_checkpoint_id = excluded.parent_checkpoint_id, "
                "channel_versions = excluded.channel_versions, key_id = excluded.key_id, "
                "ciphertext = excluded.ciphertext, wrapped_key = excluded.wrapped_key",
                [row.account_id, row.user_id, row.thread_id, row.checkpoint_ns, row.checkpoint_id,
                 row.parent_checkpoint_id, json.dumps(row.channel_versions), row.created_at,
                 row.key_id, row.ciphertext, row.wrapped_key, row.agent_id],
            )  # fmt: skip
            if row.checkpoint_ns == "":
                tx.run(
                    "INSERT INTO supervisor_checkpoints (account_id, user_id, agent_id, "
                    "thread_id, checkpoint_id, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (account_id, user_id, agent_id, thread_id) DO UPDATE SET "
                    "checkpoint_id = excluded.checkpoint_id, updated_at = excluded.updated_at "
                    "WHERE supervisor_checkpoints.checkpoint_id <= excluded.checkpoint_id",
                    [row.account_id, row.user_id, row.agent_id, row.thread_id,
                     row.checkpoint_id, row.created_at],
                )  # fmt: skip
            if keep_last is not None:
                self._prune(tx, place, keep_last)

    def prune_thread(self, owner: ThreadOwner, thread_id: str, *, keep_last: int) -> None:
        """See :meth:`CheckpointTables.prune_thread`."""
        where, params = owner.where()
        with self._storage.transaction() as tx:
            tx.scope_to(owner.account_id)
            namespaces = tx.run(
                f"SELECT DISTINCT user_id, checkpoint_ns FROM checkpoints WHERE {where} "
                "AND thread_id = ?",
                [*params, thread_id],
            ).fetchall()
            for user_id, namespace in namespaces:
                mine = ThreadOwner(owner.account_id, user_id, owner.agent_id)
                self._prune(tx, _place(mine, thread_id, namespace), keep_last)

    def _prune(self, tx: Any, place: list[Any], keep_last: int) -> None:
        """Keep the newest ``keep_last`` checkpoints of a thread's namespace, their writes
        and the blobs they reference; delete the rest in this transaction."""
        rows = tx.run(
            f"SELECT checkpoint_id, channel_versions FROM checkpoints WHERE {_PLACE} "
            "ORDER BY checkpoint_id DESC",
            place,
        ).fetchall()
        if len(rows) <= keep_last:
            return
        kept, dropped = rows[:keep_last], rows[keep_last:]
        for checkpoint_id, _ in dropped:
            for table in ("checkpoints", "checkpoint_writes"):
                tx.run(
                    f"DELETE FROM {table} WHERE {_PLACE} AND checkpoint_id = ?",
                    [*place, checkpoint_id],
                )
        referenced = {(c, str(v)) for _, cv in kept for c, v in json.loads(cv).items()}
        for channel, version in tx.run(
            f"SELECT channel, version FROM checkpoint_blobs WHERE {_PLACE}", place
        ).fetchall():
            if (channel, version) not in referenced:
                tx.run(
                    f"DELETE FROM checkpoint_blobs WHERE {_PLACE} AND channel = ? AND version = ?",
                    [*place, channel, version],
                )

    def put_writes(
        self, owner: ThreadOwner, *, thread_id: str, checkpoint_ns: str, rows: Sequence[WriteRow]
    ) -> None:
        """See :meth:`CheckpointTables.put_writes`.

        Writes for a checkpoint that retention has already pruned are dropped: LangGraph
        saves a step's writes in the background, so they may land after the next
        checkpoint's prune, and would then be kept forever for a checkpoint that is gone.
        """
        place = _place(owner, thread_id, checkpoint_ns)
        with self._storage.transaction() as tx:
            tx.scope_to(owner.account_id)
            pruned = {
                checkpoint_id
                for checkpoint_id in {w.checkpoint_id for w in rows}
                if self._pruned(tx, place, checkpoint_id)
            }
            for w in rows:
                if w.checkpoint_id in pruned:
                    continue
                conflict = (
                    "DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path, "
                    "key_id = excluded.key_id, ciphertext = excluded.ciphertext, "
                    "wrapped_key = excluded.wrapped_key"
                    if w.idx < 0
                    else "DO NOTHING"
                )
                tx.run(
                    "INSERT INTO checkpoint_writes (account_id, user_id, agent_id, thread_id, "
                    "checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, key_id, "
                    "ciphertext, wrapped_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (account_id, user_id, agent_id, thread_id, checkpoint_ns, "
                    f"checkpoint_id, task_id, idx) {conflict}",
                    [*place, w.checkpoint_id, w.task_id, w.idx, w.channel, w.task_path,
                     w.key_id, w.ciphertext, w.wrapped_key],
                )  # fmt: skip

    @staticmethod
    def _pruned(tx: Any, place: list[Any], checkpoint_id: str) -> bool:
        """Whether the namespace has no checkpoint ``checkpoint_id`` but a newer one (ids
        grow with time): it was there and retention removed it."""
        where = f"WHERE {_PLACE} AND checkpoint_id"
        row = tx.run(
            f"SELECT EXISTS (SELECT 1 FROM checkpoints {where} = ?), "
            f"EXISTS (SELECT 1 FROM checkpoints {where} > ?)",
            [*place, checkpoint_id, *place, checkpoint_id],
        ).fetchone()
        return not row[0] and bool(row[1])

    def get(
        self, owner: ThreadOwner, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> CheckpointRow | None:
        """See :meth:`CheckpointTables.get`."""
        where, params = _PLACE, _place(owner, thread_id, checkpoint_ns)
        if checkpoint_id is not None:
            where += " AND checkpoint_id = ?"
            params.append(checkpoint_id)
        with self._storage.reader(owner.account_id) as db:
            row = db.run(
                f"SELECT {_CP_COLUMNS} FROM checkpoints WHERE {where} "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                params,
            ).fetchone()
        return None if row is None else _checkpoint(row)

    def list_checkpoints(
        self,
        owner: ThreadOwner,
        *,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        before: str | None,
    ) -> list[CheckpointRow]:
        """See :meth:`CheckpointTables.list_checkpoints`."""
        where, params = owner.where()
        clauses = [where]
        for column, value, op in (
            ("thread_id", thread_id, "="),
            ("checkpoint_ns", checkpoint_ns, "="),
            ("checkpoint_id", checkpoint_id, "="),
            ("checkpoint_id", before, "<"),
        ):
            if value is not None:
                clauses.append(f"{column} {op} ?")
                params.append(value)
        with self._storage.reader(owner.account_id) as db:
            rows = db.run(
                f"SELECT {_CP_COLUMNS} FROM checkpoints WHERE {' AND '.join(clauses)} "
                "ORDER BY thread_id, checkpoint_ns, user_id, checkpoint_id DESC",
                params,
            ).fetchall()
        return [_checkpoint(r) for r in rows]

    def blobs(
        self, owner: ThreadOwner, thread_id: str, checkpoint_ns: str, versions: dict[str, str]
    ) -> list[BlobRow]:
        """See :meth:`CheckpointTables.blobs`."""
        if not versions:
            return []
        pairs = " OR ".join("(channel = ? AND version = ?)" for _ in versions)
        params = _place(owner, thread_id, checkpoint_ns)
        for channel, version in versions.items():
            params.extend([channel, str(version)])
        with self._storage.reader(owner.account_id) as db:
            rows = db.run(
                "SELECT channel, version, key_id, ciphertext, wrapped_key FROM checkpoint_blobs "
                f"WHERE {_PLACE} AND ({pairs})",
                params,
            ).fetchall()
        return [BlobRow(r[0], r[1], r[2], bytes(r[3]), bytes(r[4])) for r in rows]

    def writes(
        self, owner: ThreadOwner, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> list[WriteRow]:
        """See :meth:`CheckpointTables.writes`."""
        with self._storage.reader(owner.account_id) as db:
            rows = db.run(
                "SELECT checkpoint_id, task_id, idx, channel, task_path, key_id, ciphertext, "
                f"wrapped_key FROM checkpoint_writes WHERE {_PLACE} AND checkpoint_id = ? "
                "ORDER BY task_path, task_id, idx",
                [*_place(owner, thread_id, checkpoint_ns), checkpoint_id],
            ).fetchall()
        return [
            WriteRow(r[0], r[1], int(r[2]), r[3], r[4], r[5], bytes(r[6]), bytes(r[7]))
            for r in rows
        ]

    def delete_thread(self, owner: ThreadOwner, thread_id: str) -> None:
        """See :meth:`CheckpointTables.delete_thread`."""
        where, params = owner.where()
        with self._storage.transaction() as tx:
            tx.scope_to(owner.account_id)
            for table in (
                "checkpoints",
                "checkpoint_blobs",
                "checkpoint_writes",
                "supervisor_checkpoints",
            ):
                tx.run(f"DELETE FROM {table} WHERE {where} AND thread_id = ?", [*params, thread_id])

    def latest(self, owner: ThreadOwner, thread_id: str) -> str | None:
        """See :meth:`CheckpointTables.latest`."""
        with self._storage.reader(owner.account_id) as db:
            row = db.run(
                "SELECT checkpoint_id FROM supervisor_checkpoints WHERE account_id = ? "
                "AND user_id = ? AND agent_id = ? AND thread_id = ?",
                [*_place(owner, thread_id, "")[:3], thread_id],
            ).fetchone()
        return None if row is None else str(row[0])


def checkpoint_ddl(blob: str, real: str) -> tuple[str, ...]:
    """The checkpoint tables, in a dialect's blob and float types."""
    sealed = f"key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL"
    return (
        f"""CREATE TABLE IF NOT EXISTS checkpoints (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT, channel_versions TEXT NOT NULL,
            created_at {real} NOT NULL, {sealed},
            PRIMARY KEY (account_id, thread_id, checkpoint_ns, checkpoint_id))""",
        "CREATE INDEX IF NOT EXISTS checkpoints_owner ON checkpoints (account_id, user_id)",
        f"""CREATE TABLE IF NOT EXISTS checkpoint_blobs (
            account_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
            channel TEXT NOT NULL, version TEXT NOT NULL, user_id TEXT NOT NULL, {sealed},
            PRIMARY KEY (account_id, thread_id, checkpoint_ns, channel, version))""",
        f"""CREATE TABLE IF NOT EXISTS checkpoint_writes (
            account_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL,
            user_id TEXT NOT NULL, channel TEXT NOT NULL, task_path TEXT NOT NULL, {sealed},
            PRIMARY KEY (account_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx))""",
        f"""CREATE TABLE IF NOT EXISTS supervisor_checkpoints (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            checkpoint_id TEXT NOT NULL, updated_at {real} NOT NULL,
            PRIMARY KEY (account_id, user_id, thread_id))""",
    )


# The checkpoint-owners step: each table's columns (in order, ``agent_id`` last as ``ADD
# COLUMN`` puts it) and its key with the owner's user and agent in it.
_OWNED_TABLES: dict[str, tuple[str, str]] = {
    "checkpoints": (
        "account_id TEXT NOT NULL, user_id TEXT NOT NULL, thread_id TEXT NOT NULL, "
        "checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, "
        "channel_versions TEXT NOT NULL, created_at {real} NOT NULL, {sealed}",
        "account_id, user_id, agent_id, thread_id, checkpoint_ns, checkpoint_id",
    ),
    "checkpoint_blobs": (
        "account_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        "channel TEXT NOT NULL, version TEXT NOT NULL, user_id TEXT NOT NULL, {sealed}",
        "account_id, user_id, agent_id, thread_id, checkpoint_ns, channel, version",
    ),
    "checkpoint_writes": (
        "account_id TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        "checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, "
        "user_id TEXT NOT NULL, channel TEXT NOT NULL, task_path TEXT NOT NULL, {sealed}",
        "account_id, user_id, agent_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
    ),
    "supervisor_checkpoints": (
        "account_id TEXT NOT NULL, user_id TEXT NOT NULL, thread_id TEXT NOT NULL, "
        "checkpoint_id TEXT NOT NULL, updated_at {real} NOT NULL",
        "account_id, user_id, agent_id, thread_id",
    ),
}
_AGENT_COLUMN = "agent_id TEXT NOT NULL DEFAULT ''"


def _column_names(columns: str) -> str:
    return ", ".join(c.split()[0] for c in columns.split(", "))


def checkpoint_owner_ddl(dialect: str, blob: str, real: str) -> tuple[str, ...]:
    """The checkpoint-owners step: every checkpoint table gains ``agent_id`` (``''`` for the
    rows already there) and a key that starts with the owner (account, user, agent), so a
    thread is its owner's.

    PostgreSQL swaps the primary key in place (row-level security and statistics settings
    stay); SQLite, which cannot change a key, copies each table into a new one. Both can run
    again on tables already upgraded.
    """
    sealed = "key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL"
    statements: list[str] = []
    for table, (columns, key) in _OWNED_TABLES.items():
        statements.append(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {_AGENT_COLUMN}")
        if dialect == "postgres":
            statements += [
                f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_pkey",
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({key})",
            ]
            continue
        spelled = columns.format(real=real, sealed=sealed.format(blob=blob))
        names = f"{_column_names(spelled)}, agent_id"
        statements += [
            f"DROP TABLE IF EXISTS {table}_owned",
            f"CREATE TABLE {table}_owned ({spelled}, {_AGENT_COLUMN}, PRIMARY KEY ({key}))",
            f"INSERT INTO {table}_owned ({names}) SELECT {names} FROM {table}",
            f"DROP TABLE {table}",
            f"ALTER TABLE {table}_owned RENAME TO {table}",
        ]
    if dialect != "postgres":
        statements.append(
            "CREATE INDEX IF NOT EXISTS checkpoints_owner ON checkpoints (account_id, user_id)"
        )
    return tuple(statements)


_CHECKPOINT_TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "supervisor_checkpoints",
)

CHECKPOINTS_FEATURE = Feature(
    name="checkpoints",
    migrations=(
        Migration(
            version=1,
            name="langgraph-checkpoints",
            sqlite=checkpoint_ddl("BLOB", "REAL"),
            postgres=(
                *checkpoint_ddl("BYTEA", "DOUBLE PRECISION"),
                *no_statistics("checkpoints"),
                *no_statistics("checkpoint_blobs"),
                *no_statistics("checkpoint_writes"),
            ),
        ),
        Migration(
            version=2,
            name="row-level-security",
            sqlite=(),
            postgres=account_policies(*_CHECKPOINT_TABLES),
        ),
        Migration(
            version=3,
            name="checkpoint-owners",
            # A LangGraph thread is its owner's (account, user and agent): two users of one
            # account naming the same thread id kept one thread, where the later writer hid the
            # earlier one's state. Each checkpoint table's key now starts with the owner; the
            # rows already there keep their user and get the agent ``''`` (no agent).
            sqlite=checkpoint_owner_ddl("sqlite", "BLOB", "REAL"),
            postgres=checkpoint_owner_ddl("postgres", "BYTEA", "DOUBLE PRECISION"),
        ),
    ),
    owner_tables=_CHECKPOINT_TABLES,
)
"""The LangGraph saver's checkpoints, their blobs and pending writes, and the supervisor's
latest checkpoint per thread (sealed by the caller)."""
