"""Erasure on a busy PostgreSQL: the scrub waits for the transactions that began before it.

``VACUUM FULL`` copies into the new files every deleted row that a transaction still
running may see, so a row deleted while another process's transaction was open (a worker's
job, a request) survived the erasure's scrub in the table's files. The scrub now waits for
those transactions to end first.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from tests.conftest import TEST_KEK

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import open_storage
from confide.storage.keystore import open_key_store
from confide.testing.builders import ACCOUNT, add
from confide.testing.postgres import EmbeddedPostgres, create_schema

_SCRUB_WAITING = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND query LIKE '%xact_start <%' "
    "AND pid <> pg_backend_pid()"
)


@pytest.mark.postgres
def test_rows_deleted_under_an_older_transaction_leave_the_files_once_it_ends(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    url = postgres_server.temporary_database(request, template="confide_template")
    storage = open_storage(url, pool_max=2)
    request.addfinalizer(storage.close)
    engine = MemoryEngine(
        storage, KeyRing(primary=TEST_KEK), key_store=open_key_store(create_schema(url))
    )
    request.addfinalizer(engine.ops.close)  # before the store closes (finalizers run last first)
    add(engine, key="k", value="ultramarine-okapi-9", user_id="user-1")
    [row] = list(storage.iter_owner(ACCOUNT, "user-1"))
    # Another process's transaction, begun before the erasure and still open (it touches
    # no table the scrub rewrites, so nothing makes the scrub wait for its lock).
    older = psycopg.connect(url)
    request.addfinalizer(older.close)
    older.execute("SELECT txid_current()")

    erasing = threading.Thread(
        target=engine.erase_user, kwargs={"account_id": ACCOUNT, "user_id": "user-1"}
    )
    erasing.start()
    with psycopg.connect(url, autocommit=True) as watcher:
        deadline = time.monotonic() + 60
        # Until the scrub is done, or waits for the older transaction (polling its state).
        while erasing.is_alive() and time.monotonic() < deadline:
            if watcher.execute(_SCRUB_WAITING).fetchone()[0]:  # type: ignore[index]
                break
            erasing.join(0.02)
    older.commit()
    erasing.join(60)
    assert not erasing.is_alive()

    files = b"".join(p.read_bytes() for p in storage.data_files(shared=False) if p.exists())
    assert row.ciphertext not in files
    assert row.wrapped_key not in files
