"""PostgreSQL + pgvector backend: many stateless workers on one database."""

from __future__ import annotations

import functools
import logging
import os
import re
import struct
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from confide.errors import ConfigurationError, MissingDependencyError, StorageError
from confide.storage.base import (
    MEMORY_COLUMNS,
    Capability,
    EdgeRow,
    Neighbourhood,
    ScoredId,
    Vector,
)
from confide.storage.database import ScrubOutcome
from confide.storage.filters import compile_filter
from confide.storage.migrations import HNSW_EF_SEARCH, POSTGRES_HNSW_INDEX
from confide.storage.schema import Feature, account_policy
from confide.storage.sql import (
    MEMORY_SELECT,
    NO_NEIGHBOUR_COLUMN,
    LexicalTuning,
    NeighbourColumn,
    NeighbourRows,
    SqlExecutor,
    SqlStorage,
    SqlTransaction,
    memory_by_id,
    memory_row,
)
from confide.types import MemoryFilter

try:  # psycopg is the optional "postgres" extra
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError:  # exercised by tests/test_missing_extras.py
    psycopg = None  # type: ignore[assignment]
    ConnectionPool = None  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)

_WARNED_SCRUB: set[str] = set()
"""The servers whose missing scrub grants this process has warned about."""


class VectorParam:
    """A vector sent to PostgreSQL in pgvector's binary form (``$n::vector`` in the SQL).

    The text form costs a float-to-decimal conversion per dimension on both sides; the
    binary form is one byte copy: the dimension count and a reserved word (big-endian int16
    each), then the values as big-endian float4.
    """

    __slots__ = ("data",)

    def __init__(self, vector: Vector) -> None:
        values = np.asarray(vector, dtype=">f4").reshape(-1)
        self.data = struct.pack(">HH", values.shape[0], 0) + values.tobytes()


@functools.cache
def _vector_param_dumper() -> type:
    """The psycopg dumper that sends :class:`VectorParam` as binary (its type comes from the
    ``::vector`` cast); made on first use, as psycopg is an optional extra."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class VectorParamDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: VectorParam) -> bytes:
            return obj.data

    return VectorParamDumper


def decode_vector_send(value: Any) -> Vector:
    """A vector from ``vector_send(embedding)`` (pgvector's binary form, as ``bytea``)."""
    return np.frombuffer(bytes(value), dtype=">f4", offset=4).astype(np.float32)


def _has_table(db: SqlExecutor, name: str) -> bool:
    row = db.run("SELECT to_regclass(?) IS NOT NULL", [name]).fetchone()
    return bool(row[0])


class _BinaryRows:
    """Results in PostgreSQL's binary format.

    ``bytea`` (ciphertexts, wrapped keys, ``vector_send`` vectors) then crosses as raw bytes
    instead of hex text that the server must write and the client parse, which is most of
    what a query's rows weigh.
    """

    conn: Any

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Any:
        return self.conn.execute(sql, params, binary=True)

    def run_reusing_plan(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run a statement as a prepared statement, which PostgreSQL may plan once.

        Only these statements are prepared (``_configure``): every other one is sent
        unnamed and planned for its values on each run. After five runs of a prepared one
        on a connection, PostgreSQL keeps a generic plan when it costs no more than the
        custom ones did. See :meth:`confide.storage.sql.SqlExecutor.run_reusing_plan` for
        which statements qualify.
        """
        return self.conn.execute(sql.replace("?", "%s"), tuple(params), binary=True, prepare=True)


ACCOUNT_SETTING = "confide.account_id"
"""The setting row-level security compares each row's ``account_id`` with (the
``row-level-security`` steps)."""
ALL_ACCOUNTS_SETTING = "confide.all_accounts"
"""``on`` lifts the account policies: the explicit bypass for work that spans accounts."""
_SET_SCOPE = (
    f"SELECT set_config('{ACCOUNT_SETTING}', %s, {{local}}), "
    f"set_config('{ALL_ACCOUNTS_SETTING}', %s, {{local}})"
)
_SET_SESSION_SCOPE = _SET_SCOPE.format(local="false")
_SET_TRANSACTION_SCOPE = _SET_SCOPE.format(local="true")


def _scope_values(account_id: str | None) -> tuple[str, str]:
    """The two settings for one account, or (``None``) the bypass across accounts."""
    if account_id is None:
        return "", "on"
    return account_id, "off"


_PLAIN_VALUES = re.compile(r"(INSERT INTO .*? VALUES )(\((?:\?, )*\?\))(.*)", re.DOTALL)
"""An ``INSERT`` whose one row of ``VALUES`` is plain placeholders (and what follows it)."""
_ROWS_PER_INSERT = 500
"""Rows per multi-row ``INSERT`` (well under PostgreSQL's 65,535 parameters a statement)."""


class PostgresExecutor(_BinaryRows, SqlExecutor):
    """Executes with psycopg's ``%s`` placeholders."""

    placeholder: ClassVar[str] = "%s"


class PostgresTransaction(_BinaryRows, SqlTransaction):
    """A transaction on one pooled connection; head rows are locked ``FOR NO KEY UPDATE``."""

    placeholder: ClassVar[str] = "%s"
    # NO KEY UPDATE: writers of one memory still queue on its head row, while a transaction
    # inserting a relation to that memory (its foreign-key check takes KEY SHARE) does not
    # wait; FOR UPDATE blocked it, and two updates linking to each other's memory deadlocked.
    lock_suffix: ClassVar[str] = " FOR NO KEY UPDATE"
    share_suffix: ClassVar[str] = " FOR SHARE"
    named_lock_sql: ClassVar[str | None] = "SELECT pg_advisory_xact_lock(hashtext(?))"
    vector_column: ClassVar[str] = "embedding"
    vector_param: ClassVar[str] = "?::vector"

    _UNSCOPED: ClassVar[object] = object()

    def __init__(self, conn: Any, *, features: Sequence[Feature] = ()) -> None:
        super().__init__(conn, features=features)
        self._scope: object = self._UNSCOPED

    def scope_to(self, account_id: str) -> None:
        """Confine the rest of this transaction to ``account_id``'s rows (row-level security).

        Raises :class:`StorageError` when the transaction already works for another account:
        a transaction touches one account, and another's rows would silently be invisible.
        """
        if self._scope == account_id:
            return
        if isinstance(self._scope, str):
            raise StorageError("one transaction may touch only one account")
        self.conn.execute(_SET_TRANSACTION_SCOPE, _scope_values(account_id))
        self._scope = account_id

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Any:
        self._ensure_scope()
        return super()._execute(sql, params)

    def run_reusing_plan(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """:meth:`_BinaryRows.run_reusing_plan`, in this transaction's account scope."""
        self._ensure_scope()
        return super().run_reusing_plan(sql, params)

    def across_accounts(self) -> None:
        """Lift the account policies for the rest of this transaction (work that spans
        accounts: see docs/security.md).

        Raises :class:`StorageError` when the transaction already works for one account.
        """
        if isinstance(self._scope, str):
            raise StorageError("a transaction for one account cannot work across accounts")
        if self._scope is self._UNSCOPED:
            self.conn.execute(_SET_TRANSACTION_SCOPE, _scope_values(None))
            self._scope = None

    def _ensure_scope(self) -> None:
        if self._scope is self._UNSCOPED:
            # A statement before any account is named. Per-account writes name theirs first
            # (scope_to), and work across accounts says so (across_accounts); what still
            # arrives here touches no account's rows (store_meta, operational events of no
            # account) and runs on the bypass (see docs/security.md).
            self.across_accounts()

    @contextmanager
    def pipelined(self) -> Iterator[None]:
        """psycopg's pipeline mode: statements are sent as they come and their answers read
        when needed (a fetch) or at the block's end, so a batch of writes costs a round trip
        or two instead of one per statement."""
        with self.conn.pipeline():
            yield

    @staticmethod
    def encode_vector(vector: Vector) -> Any:
        """pgvector's binary form."""
        return VectorParam(vector)

    def has_table(self, name: str) -> bool:
        """Whether a table exists."""
        return _has_table(self, name)

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert many rows with one multi-row ``INSERT ... VALUES (...), (...)`` per
        :data:`_ROWS_PER_INSERT` rows.

        The server runs one statement for a memory's blind tokens instead of one per token
        (each its own executor start-up and round of index and key checks).

        Raises:
            ValueError: ``sql`` is not an ``INSERT`` of one row of plain ``?`` placeholders.
        """
        shape = _PLAIN_VALUES.fullmatch(sql)
        if shape is None:
            raise ValueError("insert_many takes an INSERT of one row of plain placeholders")
        if not rows:
            return
        head, one_row, tail = shape.groups()
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start : start + _ROWS_PER_INSERT]
            self.run(
                f"{head}{', '.join(one_row for _ in chunk)}{tail}",
                [value for row in chunk for value in row],
            )


class PostgresStorage(SqlStorage):
    """Memories in PostgreSQL with pgvector, through a psycopg 3 connection pool."""

    name: ClassVar[str] = "postgres"
    dialect: ClassVar[str] = "postgres"
    reuses_plans: ClassVar[bool] = True

    def __init__(
        self,
        conninfo: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        ef_search: int = HNSW_EF_SEARCH,
        wait_seconds: float = 30.0,
        lexical: LexicalTuning | None = None,
        features: Sequence[Feature],
    ) -> None:
        if psycopg is None or ConnectionPool is None:
            raise MissingDependencyError("psycopg", "postgres")
        super().__init__(lexical=lexical, features=features)
        self.conninfo = conninfo
        self._capabilities: frozenset[Capability] | None = None
        # The account each pooled connection's session is confined to (reads run outside
        # transactions, so their scope is a session setting), to skip setting it again.
        self._session_scopes: weakref.WeakKeyDictionary[Any, str | None] = (
            weakref.WeakKeyDictionary()
        )
        self._scopes_lock = threading.Lock()
        self._ef_search = int(ef_search)
        try:
            self._pool = ConnectionPool(
                conninfo,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                configure=self._configure,
                open=True,
                timeout=wait_seconds,
            )
            self._pool.wait(timeout=30)
        except (psycopg.Error, Exception) as exc:
            raise StorageError(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc

    def _configure(self, conn: Any) -> None:
        conn.adapters.register_dumper(VectorParam, _vector_param_dumper())
        # Session settings for every pooled connection, so a vector search is one statement:
        # pgvector's iterative scan keeps walking the HNSW graph until a filtered query has
        # its k rows (without it, a selective filter silently returns fewer).
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        # A prepared statement may switch to a generic plan after five runs, and a generic
        # plan cannot see how selective ``id IN (...)`` is, nor how large the owner is (a
        # scan of the owner's rows instead of a few key lookups). So psycopg prepares no
        # statement of its own accord: unnamed ones get a plan for their values each run.
        # Only statements whose plan cannot depend on their values are prepared
        # (run_reusing_plan), under PostgreSQL's default choice between the two.
        # (None would turn preparing off altogether, ``prepare=True`` included.)
        conn.prepare_threshold = sys.maxsize
        conn.execute("SET plan_cache_mode = auto")
        conn.execute(f"SET hnsw.ef_search = {self._ef_search}")

    @contextmanager
    def _open_reader(self, account_id: str | None) -> Iterator[SqlExecutor]:
        try:
            with self._pool.connection() as conn:
                self._scope_session(conn, account_id)
                yield PostgresExecutor(conn)
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL read failed: {type(exc).__name__}") from exc

    def _scope_session(self, conn: Any, account_id: str | None) -> None:
        """Confine a pooled connection's reads to one account (``None``: the bypass)."""
        with self._scopes_lock:
            known = self._session_scopes.get(conn, self._session_scopes)
        if known == account_id:
            return
        conn.execute(_SET_SESSION_SCOPE, _scope_values(account_id))
        with self._scopes_lock:
            self._session_scopes[conn] = account_id

    @contextmanager
    def transaction(self) -> Iterator[PostgresTransaction]:
        """A write transaction: commits on normal exit, rolls back on any exception."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield PostgresTransaction(conn, features=self.features)
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL write failed: {type(exc).__name__}") from exc

    def _has_table(self, db: SqlExecutor, name: str) -> bool:
        return _has_table(db, name)

    schema_lock_sql: ClassVar[str | None] = (
        "SELECT pg_advisory_xact_lock(hashtext('confide-migrations'))"
    )

    def migrate(self) -> None:
        """Apply pending migrations under an advisory lock (safe with many workers)."""
        with self.transaction() as tx:
            tx.across_accounts()  # the schema, and data upgrades of every account
            tx.run("SELECT pg_advisory_xact_lock(hashtext('confide-migrations'))")
            self._apply_migrations(tx)
        self._warn_scrub_privileges()

    def _warn_scrub_privileges(self) -> None:
        """Warn once per process and server about what erasure's scrub will be refused."""
        try:
            missing = self.scrub_privileges()
        except psycopg.Error:
            return
        where = self.conninfo.rsplit("@", 1)[-1]
        if missing and where not in _WARNED_SCRUB:
            _WARNED_SCRUB.add(where)
            log.warning(
                "erasure cannot scrub PostgreSQL's files completely until: %s "
                "(see docs/security.md)",
                "; ".join(missing),
            )

    def _vector_space_ddl(self, dims: int) -> Sequence[str]:
        return (
            f"""CREATE TABLE IF NOT EXISTS embeddings (
                memory_id TEXT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
                account_id TEXT NOT NULL, user_id TEXT NOT NULL,
                model_id TEXT NOT NULL, embedding vector({int(dims)}) NOT NULL)""",
            "CREATE INDEX IF NOT EXISTS embeddings_owner ON embeddings (account_id, user_id)",
            POSTGRES_HNSW_INDEX,
            *account_policy("embeddings"),
        )

    _vector_select: ClassVar[str] = "vector_send(embedding)"

    @staticmethod
    def _decode_vector(value: Any) -> Vector:
        return decode_vector_send(value)

    def similarities(
        self, account_id: str, memory_ids: Sequence[str], vector: Vector
    ) -> dict[str, float]:
        """Cosine similarities computed by pgvector (no vectors cross the wire)."""
        if not memory_ids:
            return {}
        marks = ", ".join("?" for _ in memory_ids)
        with self._reader(account_id) as db:
            if not self._has_vectors(db):
                return {}
            rows = db.run(
                "SELECT memory_id, 1 - (embedding <=> ?::vector) FROM embeddings "
                f"WHERE account_id = ? AND memory_id IN ({marks})",
                [VectorParam(vector), account_id, *memory_ids],
            ).fetchall()
        return {str(r[0]): float(r[1]) for r in rows}

    def _neighbour_column(
        self, db: SqlExecutor, vector: Vector | None, *, with_vectors: bool
    ) -> NeighbourColumn:
        """Cosine by pgvector, or the stored vector in binary, from the same statement."""
        if not self._has_vectors(db) or (vector is None and not with_vectors):
            return NO_NEIGHBOUR_COLUMN
        join = "LEFT JOIN embeddings e ON e.memory_id = m.id"
        if vector is None:
            return NeighbourColumn("vector_send(e.embedding)", join, [], "vector")
        return NeighbourColumn(
            "1 - (e.embedding <=> ?::vector)", join, [VectorParam(vector)], "similarity"
        )

    def neighbourhood(
        self,
        flt: MemoryFilter,
        memory_ids: Sequence[str],
        vector: Vector | None,
        *,
        with_vectors: bool = False,
    ) -> Neighbourhood:
        """Edges touching ``memory_ids`` whose other end matches ``flt``, with those rows.

        One statement: every edge joined to the row at its other end (filtered there), so
        the expansion costs one round trip to the server, not two. ``memory_ids`` are taken
        to match the filter already (they are search results).
        """
        if not memory_ids:
            return Neighbourhood([], [], {}, {})
        seeds = list(memory_ids)
        with self._reader(flt.account_id) as db:
            column = self._neighbour_column(db, vector, with_vectors=with_vectors)
            where, params = compile_filter(flt)
            found = db.run_reusing_plan(
                "SELECT r.from_id, r.to_id, r.relation_type, r.strength, "
                f"{column.select}, {MEMORY_SELECT} FROM relations r "
                # The far end of each edge is a neighbour; an edge between two given
                # memories makes each a neighbour of the other.
                "CROSS JOIN LATERAL (VALUES (CASE WHEN r.from_id = ANY(?) THEN r.to_id END), "
                "(CASE WHEN r.to_id = ANY(?) THEN r.from_id END)) AS o (other) "
                f"{memory_by_id('o.other', fenced=self.reuses_plans)} {column.join} "
                f"WHERE r.account_id = ? AND (r.from_id = ANY(?) OR r.to_id = ANY(?)) AND {where}",
                [*column.params, seeds, seeds, flt.account_id, seeds, seeds, *params],
            ).fetchall()
        edges: dict[tuple[str, str], EdgeRow] = {}
        neighbours = NeighbourRows(column.kind, self._decode_vector)
        for r in found:
            edge = EdgeRow(str(r[0]), str(r[1]), str(r[2]), float(r[3]))
            edges[(edge.from_id, edge.to_id)] = edge
            if str(r[5]) not in neighbours.rows:  # a neighbour of several seeds: once per edge
                neighbours.add(r[4], memory_row(r[5:]))
        return Neighbourhood(
            list(edges.values()),
            list(neighbours.rows.values()),
            neighbours.similarity,
            neighbours.vectors,
        )

    def vector_search(self, flt: MemoryFilter, vector: Vector, k: int) -> list[ScoredId]:
        """Top-``k`` by cosine among memories matching ``flt``.

        The HNSW index is walked with pgvector's iterative scan, so a filter does not cut the
        result short; if it still returns fewer than ``k`` while more match, an exact scan
        over the filtered rows answers instead.
        """
        where, params = compile_filter(flt)
        query = VectorParam(vector)
        with self._reader(flt.account_id) as db:
            if not self._has_vectors(db):
                return []
            # The nearest ids first, the rows of only those after: where the planner scans
            # (a small or young table, before the graph pays off) its join then carries ids,
            # not every matching row's ciphertexts.
            rows = db.run(
                "WITH nearest AS MATERIALIZED (SELECT e.memory_id, e.embedding <=> ?::vector "
                f"AS distance FROM embeddings e JOIN memories m ON m.id = e.memory_id "
                f"WHERE {where} ORDER BY distance LIMIT ?) "
                f"SELECT m.id, 1 - n.distance AS sim, {MEMORY_SELECT} FROM nearest n "
                "JOIN memories m ON m.id = n.memory_id ORDER BY n.distance, m.id",
                [query, *params, k],
            ).fetchall()
            if len(rows) >= k:
                return [ScoredId(str(r[0]), float(r[1]), memory_row(r[2:])) for r in rows]
            rows = db.run(
                f"WITH f AS MATERIALIZED (SELECT e.embedding, {MEMORY_SELECT} FROM embeddings e "
                f"JOIN memories m ON m.id = e.memory_id WHERE {where}) "
                f"SELECT id, 1 - (embedding <=> ?::vector) AS sim, {', '.join(MEMORY_COLUMNS)} "
                "FROM f ORDER BY sim DESC LIMIT ?",
                [*params, query, k],
            ).fetchall()
        hits = [ScoredId(str(r[0]), float(r[1]), memory_row(r[2:])) for r in rows]
        return sorted(hits, key=lambda h: -h.score)

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()

    @property
    def capabilities(self) -> frozenset[Capability]:
        """An HNSW graph and many processes; data files when the server's are readable here."""
        if self._capabilities is None:
            found = {Capability.HNSW, Capability.MULTI_PROCESS, Capability.ROW_SECURITY}
            if self._relation_directories() is not None:
                found.add(Capability.DATA_FILES)
            self._capabilities = frozenset(found)
        return self._capabilities

    def _relation_directories(self) -> tuple[Path, list[Path]] | None:
        """The data directory and the folders of this database's relations, if readable here.

        Reading the data directory's path takes a superuser (or ``pg_read_all_settings``), and
        the files are readable only on the server's host, by its user.
        """
        try:
            with self._pool.connection() as conn:
                root = Path(conn.execute("SELECT current_setting('data_directory')").fetchone()[0])
                found = conn.execute(
                    "SELECT DISTINCT pg_relation_filepath(oid) FROM pg_class "
                    "WHERE pg_relation_filepath(oid) IS NOT NULL"
                ).fetchall()
        except psycopg.Error:
            return None
        folders = sorted({(root / str(r[0])).parent for r in found})
        if not folders or not all(os.access(f, os.R_OK | os.X_OK) for f in folders):
            return None
        return root, folders

    def data_files(self, *, shared: bool = True) -> list[Path]:
        """The files of this database's relations and, with ``shared``, the server's WAL.

        The WAL (``pg_wal``) holds every database's changes, not only this one's, and the
        shared catalogues (``global``) every database's roles and names; ``shared=False``
        leaves both out. Raises :class:`StorageError` when the files are not readable here.
        """
        located = self._relation_directories()
        if located is None:
            raise StorageError(
                "the PostgreSQL data directory is not readable from this process "
                "(it takes a superuser on the server's host)"
            )
        root, folders = located
        if shared:
            folders = [*folders, root / "pg_wal"]
        else:
            folders = [f for f in folders if f != root / "global"]
        files: list[Path] = []
        for folder in folders:
            files.extend(p for p in sorted(folder.rglob("*")) if p.is_file())
        return files

    _SCRUBBED_TABLES: ClassVar[tuple[str, ...]] = (
        "memories",
        "proposals",
        "messages",
        "deferred_work",
        "checkpoints",
        "checkpoint_blobs",
        "checkpoint_writes",
        "supervisor_checkpoints",
        "user_keys",
        "data_keys",
    )
    """Tables that hold ciphertexts, wrapped keys or key ids."""

    scrub_wait_seconds: ClassVar[float] = 60.0
    """How long :meth:`scrub` waits for the transactions begun before it."""

    def _older_transactions_ended(self, conn: Any) -> bool:
        """Wait until every other transaction of this database begun before now has ended;
        ``False`` if one is still open after :attr:`scrub_wait_seconds`.

        ``VACUUM FULL`` copies every deleted row a running transaction may still see into
        the new files: a row an erasure deleted while another process's transaction was
        open (a job, a request) would survive the scrub.
        """
        began = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        deadline = time.monotonic() + self.scrub_wait_seconds
        while True:
            open_before = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start < %s",
                [began],
            ).fetchone()[0]
            if not open_before:
                return True
            if time.monotonic() >= deadline:
                return False
            threading.Event().wait(0.02)  # another session's state: nothing to wait on

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Rewrite the tables that held deleted ciphertexts or keys, then retire the WAL
        (every scrub rewrites them, so ``rebuild`` changes nothing).

        Transactions begun before the scrub are waited for first (at most
        :attr:`scrub_wait_seconds`): a row deleted while one was open stays visible to it,
        and ``VACUUM FULL`` would copy it into the new files.

        PostgreSQL keeps a deleted row's bytes as a dead tuple, and a plain ``VACUUM`` frees
        the space without overwriting it; ``VACUUM FULL`` writes the live rows into new files
        and drops the old ones (it locks each table for as long as the copy takes, and only
        the table's owner may run it). The WAL still holds the rows as they were inserted
        until a checkpoint after a segment switch retires their segment; with
        ``wal_recycle = off`` retired segments are deleted rather than reused. Each step the
        role is refused makes the outcome incomplete, naming the grant that would allow it
        (:meth:`scrub_privileges` lists them up front).
        """
        done: list[str] = []
        blocked: list[str] = []
        try:
            with self._pool.connection() as conn:
                role = str(conn.execute("SELECT current_user").fetchone()[0])
                not_owned = []
                if not self._older_transactions_ended(conn):
                    blocked.append(
                        f"transactions begun before the scrub were still open after "
                        f"{self.scrub_wait_seconds:g} s: rows they could see are kept until "
                        "the scrub is retried"
                    )
                for table in self._SCRUBBED_TABLES:
                    owned = conn.execute(
                        "SELECT pg_has_role(current_user, relowner, 'MEMBER') FROM pg_class "
                        "WHERE oid = to_regclass(%s)",
                        [table],
                    ).fetchone()
                    if owned is None:
                        continue
                    if not owned[0]:
                        not_owned.append(table)
                        continue
                    conn.execute(f"VACUUM (FULL) {table}")
                done.append("tables with ciphertexts or keys rewritten (VACUUM FULL)")
                if not_owned:
                    blocked.append(
                        f"role {role} does not own {', '.join(not_owned)} (VACUUM FULL takes "
                        "the owner: run the service as the role that created its tables)"
                    )
                blocked += self._retire_wal(conn, role, done)
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL scrub failed: {type(exc).__name__}") from exc
        return ScrubOutcome("; ".join(done), blocked_by="; ".join(blocked) or None)

    @staticmethod
    def _retire_wal(conn: Any, role: str, done: list[str]) -> list[str]:
        """Checkpoint, switch the WAL segment and checkpoint again; what was refused."""
        blocked: list[str] = []
        for statement, grant in (
            ("CHECKPOINT", f"GRANT pg_checkpoint TO {role}"),
            ("SELECT pg_switch_wal()", f"GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {role}"),
            ("CHECKPOINT", f"GRANT pg_checkpoint TO {role}"),
        ):
            try:
                conn.execute(statement)
            except psycopg.errors.InsufficientPrivilege:
                conn.rollback()
                if f"({grant})" not in " ".join(blocked):
                    blocked.append(
                        f"role {role} may not run {statement.removeprefix('SELECT ')} "
                        f"({grant}): the WAL keeps the deleted rows until the server's own "
                        "checkpoints retire its segment"
                    )
        if not blocked:
            done.append("WAL switched and checkpointed")
        if conn.execute("SHOW wal_recycle").fetchone()[0] != "off":
            blocked.append(
                "wal_recycle is on: retired WAL segments are reused and keep old records until "
                "overwritten (set wal_recycle = off)"
            )
        return blocked

    def scrub_privileges(self) -> list[str]:
        """The grants and settings the scrub needs that this role or server lacks (empty:
        every step of :meth:`scrub` is allowed)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT current_user, rolsuper, "
                "pg_has_role(current_user, 'pg_checkpoint', 'MEMBER'), "
                "has_function_privilege('pg_switch_wal()', 'EXECUTE'), "
                "current_setting('wal_recycle') "
                "FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
        role, superuser, checkpoint, switch, recycle = row
        missing = []
        if not superuser and not checkpoint:
            missing.append(f"GRANT pg_checkpoint TO {role}")
        if not superuser and not switch:
            missing.append(f"GRANT EXECUTE ON FUNCTION pg_switch_wal() TO {role}")
        if recycle != "off":
            missing.append("ALTER SYSTEM SET wal_recycle = off")
        return missing


def create_database_if_missing(url: str, *, via: str) -> None:
    """Create the database ``url`` names, connecting through ``via`` (on the same server).

    For the default key store beside a PostgreSQL data database: a database of its own, so
    ``pg_dump`` of the data carries no keys. A role without ``CREATEDB`` gets a clear error.
    """
    if psycopg is None:
        raise MissingDependencyError("psycopg", "postgres")
    name = url.rsplit("/", 1)[-1].split("?", 1)[0]
    try:
        with psycopg.connect(url, connect_timeout=10):
            return
    except psycopg.OperationalError:
        pass
    try:
        with psycopg.connect(via, autocommit=True, connect_timeout=10) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if exists.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.errors.DuplicateDatabase:
        return
    except psycopg.Error as exc:
        raise ConfigurationError(
            f"cannot create the key store database {name} ({type(exc).__name__}); create it, "
            "or set CONFIDE_KEYSTORE_URL to a database (ideally on another server) for keys"
        ) from exc
