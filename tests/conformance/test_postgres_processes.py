"""Several processes writing one thread on PostgreSQL get consecutive revisions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engram.engine import default_thread
from engram.storage.postgres import PostgresStorage
from engram.testing.postgres import EmbeddedPostgres

WRITER = """
import sys
from engram.config import Settings
from engram.crypto.keyring import KeyRing
from engram.engine import MemoryEngine
from engram.storage.postgres import PostgresStorage

uri, kek, n = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
storage = PostgresStorage(uri, max_size=2)
engine = MemoryEngine(storage, KeyRing(primary=kek), settings=Settings(encryption_key=sys.argv[2]))
for i in range(15):
    engine.store({"account_id": "acct", "user_id": "u", "key": f"p{n}_{i}", "value": "v"})
storage.close()
"""


def test_processes_writing_one_thread_get_consecutive_revisions(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    uri = postgres_server.temporary_database(request, template="engram_template")
    kek = bytes(range(32)).hex()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, uri, kek, str(n)]) for n in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    storage = PostgresStorage(uri)
    try:
        thread = default_thread("acct", "u")
        revs = sorted(c.rev for c in storage.changes_since(thread, 0, 100))
        assert revs == list(range(1, 46))
        assert storage.current_rev(thread) == 45
    finally:
        storage.close()
