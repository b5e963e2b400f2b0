"""SQLite backend: the embedded default (WAL, foreign keys, one writer, parallel readers)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

try:
    # A current SQLite with STAT4 histograms: the planner then knows that a category or a
    # visibility is rare and picks the index that says so (the system library lacks both).
    import pysqlite3.dbapi2 as sqlite3
except ImportError:  # pragma: no cover - platforms without the wheel
    import sqlite3

from confide.errors import StorageError
from confide.storage.base import Capability, ScoredId, SealedVector, StoredVector, Vector
from confide.storage.database import ScrubOutcome
from confide.storage.filters import compile_filter, compile_others_shared
from confide.storage.schema import Derived, Feature
from confide.storage.sql import (
    LexicalTuning,
    SqlExecutor,
    SqlStorage,
    SqlTransaction,
    select_ids_where,
)
from confide.storage.sqlite_vectors import SqliteVectorIndex
from confide.types import MemoryFilter

MMAP_BYTES = 1 << 30
CACHE_KIB = 16 * 1024
ID_ARRAY = "json_group_array(m.id)"
_ADD_COLUMN = re.compile(
    r"\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+(.*)",
    re.IGNORECASE | re.DOTALL,
)


BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for another connection's lock before it fails."""
SCRUB_WAIT_MS = 1_000
"""How long a scrub's checkpoint waits for readers before it is left pending (retried)."""


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Deleted cells and freed pages are overwritten with zeros, so an erased or purged value
    # (and a destroyed key) cannot be carved from the file's free space afterwards.
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Checkpoints run in a background thread (see Checkpointer), not inside a writer's commit.
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    # Reads map the database file instead of copying pages through read() calls: a query
    # touches a few hundred scattered pages, and the copies were a third of its time.
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    return conn


class Checkpointer:
    """Folds the WAL into the database (and refreshes planner statistics) in the background.

    SQLite's automatic checkpoint runs inside whichever commit crosses the threshold, adding
    milliseconds to that write; here a commit only looks at the WAL's size, and a PASSIVE
    checkpoint (which never blocks writers) runs on its own connection once it is large.

    A PASSIVE checkpoint cannot catch up with a writer that never pauses: each bulk commit
    into a large store appends tens of megabytes of pages while the last ones are copied
    back, the WAL is never restarted, and it grows without bound (20 GB within five minutes
    of filling a store of a million memories, until the disk was full). Past
    ``wal_hard_limit`` the checkpoint is FULL instead: it waits for the current write, holds
    the next one back while it copies every frame, and the following commit starts the WAL
    over. Writers are slowed to the speed of the copy, and the WAL stays near the limit.
    """

    def __init__(
        self, path: str, *, wal_limit: int = 4 << 20, wal_hard_limit: int = 64 << 20
    ) -> None:
        self._path = path
        self._wal = path + "-wal"
        self._wal_limit = wal_limit
        self._wal_hard_limit = wal_hard_limit
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._analysed_rows: int | None = None  # read from the stored statistics at first

    def committed(self) -> None:
        """Note a commit; wake the checkpointer once the WAL has grown past the threshold."""
        try:
            wal_bytes = os.path.getsize(self._wal)
        except OSError:
            return
        if wal_bytes < self._wal_limit:
            return
        with self._lock:
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._run, name="confide-sqlite-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        conn = _connect(self._path)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopped:
                    return
                conn.execute(f"PRAGMA wal_checkpoint({self.mode()})").fetchall()
                self._refresh_statistics(conn)
        finally:
            conn.close()

    def mode(self) -> str:
        """The checkpoint the WAL's size calls for: ``PASSIVE``, or ``FULL`` past the hard
        limit."""
        try:
            wal_bytes = os.path.getsize(self._wal)
        except OSError:
            return "PASSIVE"
        return "FULL" if wal_bytes >= self._wal_hard_limit else "PASSIVE"

    def _refresh_statistics(self, conn: sqlite3.Connection) -> None:
        # Without statistics SQLite may walk an owner index instead of looking rows up by id
        # (10x slower at 10k memories), so re-analyse each time the table doubles. (A sampled
        # ANALYZE misjudged the state column and walked every active row instead.)
        # The key store is a SQLite file too, with no memories table: nothing to analyse.
        if not _table_exists(conn, "memories"):
            return
        if self._analysed_rows is None:
            # A process that opens an analysed store goes on from its statistics. Counting
            # from zero re-analysed the whole store at its first checkpoint, holding the
            # write lock throughout.
            self._analysed_rows = _rows_when_analysed(conn)
        row = conn.execute("SELECT MAX(rowid) FROM memories").fetchone()
        rows = int(row[0] or 0)
        if rows >= max(1000, 2 * self._analysed_rows):
            conn.execute("ANALYZE")
            self._analysed_rows = rows

    def stop(self) -> None:
        """Stop the thread (a final checkpoint is the caller's)."""
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [name])
    return found.fetchone() is not None


def _rows_when_analysed(conn: sqlite3.Connection) -> int:
    """How many memories the stored statistics counted (0 if never analysed)."""
    if not _table_exists(conn, "sqlite_stat1"):
        return 0
    row = conn.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = 'memories' LIMIT 1").fetchone()
    return int(str(row[0]).split()[0]) if row else 0


def _has_table(db: SqlExecutor, name: str) -> bool:
    row = db.run("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [name])
    return row.fetchone() is not None


class SqliteTransaction(SqlTransaction):
    """A ``BEGIN IMMEDIATE`` transaction on the writer connection."""

    def delete_owner(
        self, account_id: str, user_id: str, *, derived: Derived | None = None
    ) -> dict[str, int]:
        """Delete the user's rows, including the vector index bookkeeping."""
        counts = super().delete_owner(account_id, user_id, derived=derived)
        for table in ("vector_owners", "vector_snapshots"):
            if self.has_table(table):
                self.run(
                    f"DELETE FROM {table} WHERE account_id = ? AND user_id = ?",
                    [account_id, user_id],
                )
        return counts

    def has_table(self, name: str) -> bool:
        """Whether a table exists."""
        return _has_table(self, name)

    def put_sealed_vector(
        self, memory_id: str, account_id: str, user_id: str, model_id: str, sealed: SealedVector
    ) -> None:
        """Insert a sealed embedding with the id of the key it is sealed under."""
        self.run(
            "INSERT INTO embeddings (memory_id, account_id, user_id, model_id, vector, key_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [memory_id, account_id, user_id, model_id, sealed.blob, sealed.key_id],
        )

    def seal_vectors_in_place(self, sealed: Sequence[tuple[str, SealedVector]]) -> int:
        """Replace clear embeddings by their sealed form (the upgrade of an older store);
        returns how many rows changed. A row sealed meanwhile is left as it is."""
        changed = 0
        for memory_id, vector in sealed:
            changed += self.run(
                "UPDATE embeddings SET vector = ?, key_id = ? "
                "WHERE memory_id = ? AND key_id IS NULL",
                [vector.blob, vector.key_id, memory_id],
            ).rowcount
        return changed

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert many rows in one ``executemany``."""
        if rows:
            self.conn.executemany(sql, rows)  # type: ignore[attr-defined]


class SqliteStorage(SqlStorage):
    """Memories in one SQLite file.

    Each thread reads through its own connection (WAL lets readers run beside the writer);
    writes are serialised by ``BEGIN IMMEDIATE`` and a process-local lock.
    """

    name: ClassVar[str] = "sqlite"
    dialect: ClassVar[str] = "sqlite"
    capabilities: frozenset[Capability] = frozenset(
        {Capability.IN_PROCESS_VECTORS, Capability.SEALED_VECTORS, Capability.DATA_FILES}
    )

    def __init__(
        self,
        path: str | Path,
        *,
        lexical: LexicalTuning | None = None,
        features: Sequence[Feature],
    ) -> None:
        super().__init__(lexical=lexical, features=features)
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not Path(self.path).exists():
                Path(self.path).touch(mode=0o600)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        self.vector_index = SqliteVectorIndex(snapshots=self)
        self._checkpointer = Checkpointer(self.path)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StorageError("storage is closed")
            try:
                conn = _connect(self.path)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot open SQLite database: {exc}") from exc
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _open_reader(self, account_id: str | None) -> Iterator[SqlExecutor]:
        # One process owns the file; there is no row-level security to confine reads.
        try:
            yield SqlExecutor(self._connection())
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite read failed: {type(exc).__name__}") from exc

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        """A write transaction: commits on normal exit, rolls back on any exception."""
        conn = self._connection()
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(f"SQLite could not begin a write: {exc}") from exc
            try:
                yield SqliteTransaction(conn, features=self.features)
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StorageError(f"SQLite write failed: {type(exc).__name__}") from exc
                raise
            else:
                conn.execute("COMMIT")
                self._checkpointer.committed()

    def _has_table(self, db: SqlExecutor, name: str) -> bool:
        return _has_table(db, name)

    def migrate(self) -> None:
        """Apply pending migrations."""
        with self.transaction() as tx:
            self._apply_migrations(tx)

    def _run_migration_statement(self, tx: SqlTransaction, statement: str) -> None:
        # SQLite has no ``ADD COLUMN IF NOT EXISTS``; migrations write it as PostgreSQL does,
        # and here it becomes a plain ADD COLUMN unless the column is there already (so a
        # migration re-run after its record was lost does not fail on a duplicate column).
        match = _ADD_COLUMN.fullmatch(statement)
        if match is None:
            tx.run(statement)
            return
        table, column, definition = match.groups()
        exists = tx.run(
            "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", [table, column]
        ).fetchone()
        if exists is None:
            tx.run(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    def close(self) -> None:
        """Checkpoint, then close every connection this storage opened."""
        self.vector_index.close()
        self._checkpointer.stop()
        if not self._closed and self.path != ":memory:":
            # If another process holds the database, its own close folds the WAL; waiting
            # here for its readers would hold off its writers all the while.
            with contextlib.suppress(sqlite3.Error):
                conn = self._connection()
                conn.execute(f"PRAGMA busy_timeout = {SCRUB_WAIT_MS}")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._closed = True
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def vector_search(self, flt: MemoryFilter, vector: Vector, k: int) -> list[ScoredId]:
        """Top-``k`` by cosine among memories matching ``flt`` (see :mod:`sqlite_vectors`)."""
        where, params = compile_filter(flt)
        with self._reader(flt.account_id) as db:
            if not self._has_vectors(db):
                return []

            # The filter check reads ids only: most of the rows it passes never rank high
            # enough to be read in full, and the source reads those that do in one go. The
            # ids come back in one aggregated row: every row fetched releases and retakes the
            # GIL, and with worker threads busy each retake can wait.
            def passes(ids: list[str]) -> set[str]:
                found: set[str] = set()
                for (packed,) in select_ids_where(db, ID_ARRAY, ids, where, params):
                    found.update(json.loads(packed))
                return found

            def matching() -> list[str]:
                return [
                    str(r[0])
                    for r in db.run(f"SELECT m.id FROM memories m WHERE {where}", params).fetchall()
                ]

            if flt.user_id is None:
                return self._scan(db, flt, vector, k)
            hits = self.vector_index.search(
                db, (flt.account_id, flt.user_id), vector, k, passes, matching, self.open_rows
            )
            if flt.include_shared:
                shared = self._scan(db, flt, vector, k, others_shared=True)
                hits = sorted([*hits, *shared], key=lambda h: -h.score)[:k]
            return hits

    def vectors(self, account_id: str, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """Stored embeddings, from the in-process index where it holds them."""
        found = self.vector_index.lookup(account_id, memory_ids)
        missing = [m for m in memory_ids if m not in found]
        if not missing:
            return found
        with self._reader(account_id) as db:
            if not self._has_vectors(db):
                return found
            rows = select_ids_where(
                db,
                "e.memory_id, m.user_id, e.model_id, e.key_id, e.vector",
                missing,
                "m.account_id = ?",
                [account_id],
                join="JOIN embeddings e ON e.memory_id = m.id",
            )
        found.update(self._opened(account_id, [(str(r[1]), r) for r in rows]))
        return found

    def clear_vectors(self, limit: int) -> list[tuple[str, str, str, str, Vector]]:
        """Up to ``limit`` embeddings stored in clear (before vectors were sealed), of every
        account: the upgrade that seals them."""
        with self._reader_across_accounts() as db:
            if not self._has_vectors(db):
                return []
            rows = db.run(
                "SELECT memory_id, account_id, user_id, model_id, vector FROM embeddings "
                "WHERE key_id IS NULL ORDER BY seq LIMIT ?",
                [limit],
            ).fetchall()
        return [
            (str(r[0]), str(r[1]), str(r[2]), str(r[3]), np.frombuffer(bytes(r[4]), np.float32))
            for r in rows
        ]

    def open_rows(self, owner: tuple[str, str], rows: Sequence[StoredVector]) -> list[bytes | None]:
        """Open one owner's stored embeddings (float32 bytes): sealed ones with the bound
        opener, clear ones (written before vectors were sealed) as they are."""
        if all(r.key_id is None for r in rows):
            return [r.data for r in rows]
        if self.vector_opener is None:
            raise StorageError(
                "this store's vectors are sealed; open it with its embedder (Confide.open) "
                "to search them"
            )
        return self.vector_opener.open_vectors(owner[0], owner[1], rows)

    def load_index_snapshot(
        self, db: SqlExecutor, owner: tuple[str, str]
    ) -> tuple[int, int, bytes] | None:
        """The owner's stored vector index snapshot, opened with the bound opener, as
        ``(max_seq, deletions, data)``; ``None`` when there is none or it does not open."""
        if self.vector_opener is None:
            return None
        row = db.run(
            "SELECT max_seq, deletions, key_id, snapshot FROM vector_snapshots "
            "WHERE account_id = ? AND user_id = ?",
            list(owner),
        ).fetchone()
        if row is None:
            return None
        data = self.vector_opener.open_snapshot(
            owner[0], owner[1], SealedVector(str(row[2]), bytes(row[3]))
        )
        return None if data is None else (int(row[0]), int(row[1]), data)

    def save_index_snapshot(
        self, owner: tuple[str, str], max_seq: int, deletions: int, data: bytes
    ) -> None:
        """Seal ``data`` under the owner's key and store it as their snapshot, unless a newer
        one is stored or the owner's vectors were erased (or reset) since it was taken.

        A snapshot of as many rows but more deletions replaces one that a load would find
        too stale to use.
        """
        if self.vector_opener is None or self._closed:
            return
        sealed = self.vector_opener.seal_snapshot(owner[0], owner[1], data)
        with self.transaction() as tx:
            tx.run(
                "INSERT INTO vector_snapshots "
                "(account_id, user_id, max_seq, deletions, key_id, snapshot) "
                "SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM vector_owners o "
                "WHERE o.account_id = ? AND o.user_id = ? AND o.max_seq >= ? "
                "AND o.deletions >= ?) "
                "ON CONFLICT (account_id, user_id) DO UPDATE SET max_seq = excluded.max_seq, "
                "deletions = excluded.deletions, key_id = excluded.key_id, "
                "snapshot = excluded.snapshot WHERE excluded.max_seq > vector_snapshots.max_seq "
                "OR excluded.deletions > vector_snapshots.deletions",
                [
                    *owner,
                    max_seq,
                    deletions,
                    sealed.key_id,
                    sealed.blob,
                    *owner,
                    max_seq,
                    deletions,
                ],
            )

    def _opened(self, account_id: str, rows: Sequence[tuple[str, Any]]) -> dict[str, Vector]:
        """``memory_id -> vector`` of ``(user_id, (memory_id, _, model_id, key_id, vector))``
        rows of several owners; rows that do not open are left out."""
        by_user: dict[str, list[StoredVector]] = {}
        for user_id, r in rows:
            by_user.setdefault(user_id, []).append(
                StoredVector(str(r[0]), str(r[2]), r[3], bytes(r[4]))
            )
        out: dict[str, Vector] = {}
        for user_id, stored in by_user.items():
            for row, vector in zip(
                stored, self.open_rows((account_id, user_id), stored), strict=True
            ):
                if vector is not None:
                    out[row.memory_id] = np.frombuffer(vector, dtype=np.float32)
        return out

    def _scan(
        self,
        db: SqlExecutor,
        flt: MemoryFilter,
        vector: Vector,
        k: int,
        others_shared: bool = False,
    ) -> list[ScoredId]:
        """Exact scan over every memory matching the filter (account-wide or shared)."""
        where, params = compile_others_shared(flt) if others_shared else compile_filter(flt)
        rows = db.run(
            "SELECT m.id, m.user_id, e.model_id, e.key_id, e.vector FROM memories m "
            f"JOIN embeddings e ON e.memory_id = m.id WHERE {where}",
            params,
        ).fetchall()
        opened = self._opened(flt.account_id, [(str(r[1]), r) for r in rows])
        if not opened:
            return []
        ids = list(opened)
        sims = np.vstack([opened[i] for i in ids]) @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-sims, kind="stable")[:k]
        return [ScoredId(ids[i], float(sims[i])) for i in order]

    def checkpoint(self) -> None:
        """Fold the WAL into the database file."""
        self._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def data_files(self, *, shared: bool = True) -> list[Path]:
        """The database file and its ``-wal``, ``-shm`` and ``-journal`` files that exist.

        All of them are this database's own, so ``shared`` changes nothing.
        """
        if self.path == ":memory:":
            return []
        files = (self.path + suffix for suffix in ("", "-wal", "-shm", "-journal"))
        return [Path(f) for f in files if Path(f).is_file()]

    def scrub(self, *, rebuild: bool = False) -> ScrubOutcome:
        """Fold the WAL into the (zeroed) database file and truncate it; with ``rebuild``,
        ``VACUUM`` first.

        With ``secure_delete`` a deleted cell and a freed page are zeroed; the WAL, though,
        still holds every page as it was written before, until a checkpoint truncates it.
        The checkpoint waits (up to the busy timeout) for readers of older snapshots; while
        one holds on, the outcome is incomplete and the caller owes a later scrub.

        ``secure_delete`` does not reach every copy: when a B-tree balance rebuilds a page
        it writes the cells it keeps afresh and leaves the bytes of those it moved to a
        sibling in the page's unallocated space, so a row deleted later can survive there as
        a stale copy (a serving process balances pages all the time). ``VACUUM`` writes every
        page anew; it holds off writers while it runs, which is why it is kept for a scrub
        whose scan still found residue.
        """
        if self.path == ":memory:":
            return ScrubOutcome("in-memory database: nothing on disk")
        conn = self._connection()
        # A checkpoint that waits for readers also holds off new writers meanwhile, so it
        # waits only briefly: a scrub left pending is retried, a writer held for the whole
        # busy timeout would fail its request.
        conn.execute(f"PRAGMA busy_timeout = {SCRUB_WAIT_MS}")
        try:
            if rebuild:
                with self._write_lock:
                    conn.execute("VACUUM")
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            if "lock" not in str(exc):
                raise StorageError(f"SQLite scrub failed: {type(exc).__name__}") from exc
            busy = 1  # another process writes: retried like a reader that holds the WAL
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite scrub failed: {type(exc).__name__}") from exc
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if busy:
            return ScrubOutcome(
                "SQLite secure_delete zeroed the deleted rows; the WAL still holds older page "
                "images",
                blocked_by=f"a reader holds the WAL of {Path(self.path).name} (a backup, "
                "another process or a long read): the scrub is retried until it closes",
            )
        return ScrubOutcome(
            "SQLite rewrote the database whole (VACUUM); WAL checkpointed and truncated"
            if rebuild
            else "SQLite secure_delete zeroed the deleted rows; WAL checkpointed and truncated"
        )
