"""The SQLite checkpointer: files without memories (the key store's), a WAL past its limit,
statistics refreshed as the store doubles, across processes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from confide.storage.keystore import open_key_store
from confide.storage.sqlite import Checkpointer


def test_statistics_refresh_skips_a_file_without_memories(tmp_path: Path) -> None:
    # A key store is a SQLite file with key tables only; once its WAL grew past the limit
    # the checkpoint thread died on "no such table: memories" and never folded it again.
    path = tmp_path / "keys.db"
    open_key_store(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path)
    try:
        Checkpointer(str(path))._refresh_statistics(conn)
    finally:
        conn.close()


def test_a_wal_past_the_hard_limit_gets_a_full_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "confide.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("CREATE TABLE t (x BLOB)")
        checkpointer = Checkpointer(str(path), wal_limit=1 << 10, wal_hard_limit=256 << 10)
        assert checkpointer.mode() == "PASSIVE"
        conn.execute("INSERT INTO t VALUES (zeroblob(512 * 1024))")
        assert (tmp_path / "confide.db-wal").stat().st_size >= 256 << 10
        assert checkpointer.mode() == "FULL"
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(FULL)").fetchone()
        assert (busy, copied) == (0, frames)
    finally:
        conn.close()


def _analysed_rows(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'memories_x'").fetchone()
    return int(row[0].split()[0])


def test_statistics_are_refreshed_as_the_store_doubles_not_when_a_process_starts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "confide.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("CREATE TABLE memories (x INTEGER)")
        conn.execute("CREATE INDEX memories_x ON memories (x)")

        def add(n: int) -> None:
            conn.executemany("INSERT INTO memories (x) VALUES (?)", [(i % 7,) for i in range(n)])

        add(1500)
        Checkpointer(str(path))._refresh_statistics(conn)
        assert _analysed_rows(conn) == 1500
        # Another process opens the store a little larger: its first checkpoint leaves the
        # statistics alone, as the first process would have.
        add(500)
        restarted = Checkpointer(str(path))
        restarted._refresh_statistics(conn)
        assert _analysed_rows(conn) == 1500
        # Twice the analysed size: analysed again.
        add(1000)
        restarted._refresh_statistics(conn)
        assert _analysed_rows(conn) == 3000
    finally:
        conn.close()
