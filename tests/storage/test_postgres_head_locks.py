"""PostgreSQL: a writer holding a memory's head row does not block a relation to that memory.

Each update locks the head it supersedes; relations the vector indexer writes check their
foreign keys with KEY SHARE locks on the memories they link. With ``FOR UPDATE`` heads, two
concurrent updates whose new versions linked to each other's head deadlocked (a 503 under
``bench/crash.py``); ``FOR NO KEY UPDATE`` still queues writers of one memory but lets the
link through.
"""

from __future__ import annotations

import threading

import pytest

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.keystore import open_key_store
from confide.storage.postgres import PostgresStorage
from confide.testing.builders import ACCOUNT, add
from confide.testing.postgres import EmbeddedPostgres, create_schema


def test_a_locked_head_lets_another_transaction_link_to_it(
    postgres_server: EmbeddedPostgres, keys_database: str, request: pytest.FixtureRequest
) -> None:
    storage = PostgresStorage(
        postgres_server.temporary_database(request, template="confide_template"),
        max_size=4,
        features=FEATURES,
    )
    key_store = open_key_store(create_schema(keys_database))
    try:
        engine = MemoryEngine(storage, KeyRing(primary=bytes(range(32))), key_store=key_store)
        head, other = add(engine, key="head"), add(engine, key="other")
        linked: list[object] = []

        def link() -> None:
            try:
                with storage.transaction() as tx:
                    tx.run("SET LOCAL lock_timeout = '5s'")
                    tx.run(
                        "INSERT INTO relations (from_id, to_id, account_id, user_id, "
                        "relation_type, strength, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [other.id, head.id, ACCOUNT, "user-1", "similar", 0.9, 1.0],
                    )
                linked.append(True)
            except Exception as exc:  # the lock timeout, had the link waited for the head
                linked.append(exc)

        with storage.transaction() as tx:
            assert tx.lock_lineage(ACCOUNT, head.lineage_id) is not None
            linker = threading.Thread(target=link)
            linker.start()
            linker.join()  # inside the head's transaction: the link must not wait for it
        assert linked == [True]
    finally:
        key_store.close()
        storage.close()
