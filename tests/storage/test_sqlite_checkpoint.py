"""The SQLite checkpointer also serves files without memories (the key store's)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engram.storage.keystore import open_key_store
from engram.storage.sqlite import Checkpointer


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
