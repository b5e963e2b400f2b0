"""PostgreSQL: processes starting together on a fresh store each bind the embedder.

The first bind creates the vector table, its index and its row-level security policy;
without a lock two processes doing it at once collided in PostgreSQL's catalogue (a
``UniqueViolation`` that stopped one of two ``confide serve`` processes at start-up).
"""

from __future__ import annotations

import threading

import pytest

from confide.storage import FEATURES
from confide.storage.postgres import PostgresStorage
from confide.testing.postgres import EmbeddedPostgres

ROUNDS = 4
BINDERS = 3


def _bind(storage: PostgresStorage, start: threading.Barrier, failures: list[str]) -> None:
    start.wait()
    try:
        storage.bind_embedder("test-model", 8)
    except Exception as exc:  # collected: the test's assertion names it
        failures.append(type(exc).__name__)


def test_binders_starting_together_all_bind(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    for _ in range(ROUNDS):
        url = postgres_server.temporary_database(request, template="confide_template")
        stores = [PostgresStorage(url, max_size=1, features=FEATURES) for _ in range(BINDERS)]
        start = threading.Barrier(BINDERS)
        failures: list[str] = []
        threads = [threading.Thread(target=_bind, args=(s, start, failures)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for storage in stores:
            assert storage.embedder_spec() == "test-model:8"
            storage.close()
        assert failures == []
