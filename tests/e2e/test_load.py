"""Load: concurrent clients against real ``confide serve`` processes get no failed answer.

One service on SQLite (concurrent writes queue for its one writer instead of failing with
"database is locked") and two on one PostgreSQL (calls routed by ``callSessionId``), each
under 20 clients of mixed traffic for a few seconds. ``bench/load.py`` runs 50 clients for
a minute and prints the latencies.
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from pathlib import Path

import pytest

from confide.server.auth import ApiKeys
from confide.storage import open_storage
from confide.testing.forensics import sentinels_in_clear
from confide.testing.load import LOAD_ACCOUNT, SENT_SHAPE, run_load
from confide.testing.postgres import EmbeddedPostgres, create_schema
from confide.testing.processes import confide_env, serve

KEY = "77" * 32
ROUTES = {
    "POST /v1/memories",
    "PATCH /v1/memories/{id}",
    "POST /v1/memory_query",
    "POST /sessions",
    "POST /sessions/{id}/connected",
    "POST /sessions/{id}/turns",
    "POST /tools/store_memory",
    "POST /sessions/{id}/end",
}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_twenty_clients_of_mixed_traffic_get_no_failed_answer(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        data, keys = f"sqlite:///{tmp_path / 'confide.db'}", f"sqlite:///{tmp_path / 'keys.db'}"
        servers = 1
    else:
        server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
        data = server.temporary_database(request, template="confide_template")
        keys = create_schema(request.getfixturevalue("keys_database"))
        servers = 2
    storage = open_storage(data, pool_max=2)
    try:
        token = ApiKeys.over(storage).create(LOAD_ACCOUNT)
    finally:
        storage.close()
    env = confide_env(
        {
            "CONFIDE_HOME": str(tmp_path / "home"),
            "CONFIDE_STORAGE_URL": data,
            "CONFIDE_KEYSTORE_URL": keys,
            "MEMORY_ENCRYPTION_KEY": KEY,
            "CONFIDE_MIN_SESSION_SECONDS": "0",  # calls are summarised: extraction writes too
        }
    )
    with ExitStack() as stack:
        processes = [stack.enter_context(serve(env)) for _ in range(servers)]
        bases = [process.wait_ready() for process in processes]
        report = asyncio.run(run_load(bases, token, clients=20, seconds=4.0))
    assert dict(report.errors) == {}
    assert set(report.latencies) == ROUTES
    assert report.requests >= 40
    # Sentinels: no value or call turn the clients sent is readable in any file (WAL too).
    assert len(report.sent) >= 40
    assert sentinels_in_clear(data, keys, SENT_SHAPE, report.sent) == 0
