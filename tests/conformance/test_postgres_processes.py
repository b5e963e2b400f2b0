"""Several processes writing one thread on PostgreSQL get consecutive revisions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from confide.engine import default_thread
from confide.storage import FEATURES
from confide.storage.postgres import PostgresStorage
from confide.testing.postgres import EmbeddedPostgres

WRITER = """
import sys
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.postgres import PostgresStorage

uri, kek, n = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]
storage = PostgresStorage(uri, max_size=2, features=FEATURES)
engine = MemoryEngine(storage, KeyRing(primary=kek), settings=Settings(encryption_key=sys.argv[2]))
for i in range(15):
    engine.store({"account_id": "acct", "user_id": "u", "key": f"p{n}_{i}", "value": "v"})
storage.close()
"""


def test_processes_writing_one_thread_get_consecutive_revisions(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    uri = postgres_server.temporary_database(request, template="confide_template")
    kek = bytes(range(32)).hex()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, uri, kek, str(n)]) for n in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    storage = PostgresStorage(uri, features=FEATURES)
    try:
        thread = default_thread("acct", "u")
        revs = sorted(c.rev for c in storage.changes_since(thread, 0, 100, account_id="acct"))
        assert revs == list(range(1, 46))
        assert storage.current_rev(thread, account_id="acct") == 45
    finally:
        storage.close()


READER = """
import sys
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.postgres import PostgresStorage

uri, kek = sys.argv[1], bytes.fromhex(sys.argv[2])
storage = PostgresStorage(uri, max_size=2, features=FEATURES)
engine = MemoryEngine(storage, KeyRing(primary=kek), settings=Settings(encryption_key=sys.argv[2]))
header = engine.deliver_delta(account_id="acct", user_id="u", reader="agent")
print("shown" if header.startswith("Memory updates since rev 0:") else "none")
storage.close()
"""


def test_processes_delivering_one_header_show_each_change_once(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    uri = postgres_server.temporary_database(request, template="confide_template")
    kek = bytes(range(32)).hex()
    writer = subprocess.run([sys.executable, "-c", WRITER, uri, kek, "0"], timeout=120)
    assert writer.returncode == 0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", READER, uri, kek], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert said == ["none", "none", "shown"]
