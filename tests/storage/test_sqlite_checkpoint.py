"""The SQLite checkpointer: files without memories (the key store's), a WAL past its limit."""

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
