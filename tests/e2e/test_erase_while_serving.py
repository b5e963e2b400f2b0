"""``confide erase-user`` beside a ``confide serve`` on the same SQLite store: the service
answers every concurrent ``POST /v1/memories`` with 201, none with a 5xx.

A write finds its neighbours (the relation edges it will store) before its transaction; an
erasure that commits in between deletes some of them. Such a write once failed on the
relations' foreign key and answered 503.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from confide.server.auth import ApiKeys
from confide.storage import open_storage
from confide.testing.processes import confide_env, serve

USERS = ("ann", "bob", "cyd")
POSTERS = 6
ERASURES = 6
WRITES_BETWEEN = 25
"""Writes every erasure waits for, so each lands among writes of the users it erases."""


class _Writes:
    """The answers the posters got, and a wait for the next ``n`` of them (no sleeps)."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.failures: list[str] = []
        self._changed = threading.Condition()
        self.stop = threading.Event()

    def record(self, response: httpx.Response) -> None:
        with self._changed:
            self.statuses[response.status_code] += 1
            if response.status_code != 201:
                self.failures.append(f"{response.status_code} {response.text[:200]}")
            self._changed.notify_all()

    def wait_for(self, more: int) -> None:
        with self._changed:
            target = sum(self.statuses.values()) + more
            assert self._changed.wait_for(
                lambda: sum(self.statuses.values()) >= target or self.stop.is_set(), timeout=120
            )


@pytest.mark.slow
def test_erase_user_beside_a_serving_process_fails_no_write(tmp_path: Path) -> None:
    data = f"sqlite:///{tmp_path / 'confide.db'}"
    storage = open_storage(data)
    try:
        token = ApiKeys.over(storage).create("default")
    finally:
        storage.close()
    env = confide_env(
        {
            "CONFIDE_HOME": str(tmp_path / "home"),
            "CONFIDE_STORAGE_URL": data,
            "CONFIDE_KEYSTORE_URL": f"sqlite:///{tmp_path / 'keys.db'}",
            "MEMORY_ENCRYPTION_KEY": "66" * 32,
        }
    )
    writes = _Writes()
    with serve(env) as server:
        base = server.wait_ready()

        def post(poster: int) -> None:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
                n = 0
                while not writes.stop.is_set():
                    user = USERS[(poster + n) % len(USERS)]
                    value = f"{user} keeps notes about the garden roses, entry {poster}-{n}"
                    writes.record(http.post("/v1/memories", json={"user_id": user, "value": value}))
                    n += 1

        posters = [threading.Thread(target=post, args=(p,)) for p in range(POSTERS)]
        for thread in posters:
            thread.start()
        try:
            for n in range(ERASURES):
                writes.wait_for(WRITES_BETWEEN)
                erased = subprocess.run(
                    [sys.executable, "-c", "from confide.cli import main; main()",
                     "erase-user", "--user", USERS[n % len(USERS)], "--yes"],
                    env=env, capture_output=True, text=True, timeout=300, check=False,
                )  # fmt: skip
                assert erased.returncode == 0, erased.stderr[-2000:]
            writes.wait_for(WRITES_BETWEEN)
        finally:
            writes.stop.set()
            for thread in posters:
                thread.join()
    assert writes.failures == []
    assert writes.statuses[201] >= (ERASURES + 1) * WRITES_BETWEEN
