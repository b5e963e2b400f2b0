"""No memory text in clear anywhere in storage: SQLite files (with WAL) and a pg_dump."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from engram.engine import MemoryEngine
from engram.storage.base import Storage
from engram.storage.postgres import PostgresStorage
from engram.storage.sqlite import SqliteStorage
from engram.testing.builders import ACCOUNT, add
from engram.testing.postgres import EmbeddedPostgres

SENTINEL = "Xylophonist9274Marmalade"


def _write_everything(engine: MemoryEngine) -> None:
    first = add(engine, value=f"I keep a {SENTINEL} in the shed", tags=(SENTINEL,))
    second = engine.update(
        first.id,
        {"value": f"now the {SENTINEL} is gone", "metadata": {"n": SENTINEL}},
        account_id=ACCOUNT,
    )
    engine.forget(second.id, account_id=ACCOUNT)
    engine.restore(second.id, account_id=ACCOUNT)
    add(engine, key="note", value=SENTINEL.lower(), user_id="user-2")


def _storage_dump(storage: Storage, request_server: EmbeddedPostgres | None) -> bytes:
    if isinstance(storage, SqliteStorage):
        base = Path(storage.path)
        files = [base, base.with_name(base.name + "-wal"), base.with_name(base.name + "-shm")]
        return b"".join(p.read_bytes() for p in files if p.exists())
    assert isinstance(storage, PostgresStorage) and request_server is not None
    database = urlsplit(storage.conninfo).path.lstrip("/")
    return request_server.dump(database).encode()


def test_sentinel_never_reaches_storage_files(
    engine: MemoryEngine, storage: Storage, request: object
) -> None:
    _write_everything(engine)
    server = (
        request.getfixturevalue("postgres_server")  # type: ignore[attr-defined]
        if isinstance(storage, PostgresStorage)
        else None
    )
    dump = _storage_dump(storage, server)
    assert len(dump) > 1000  # the dump really holds the rows
    assert SENTINEL.encode() not in dump
    assert SENTINEL.lower().encode() not in dump
    assert b"shed" not in dump
