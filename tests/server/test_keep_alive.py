"""``confide serve`` keeps idle connections open for ``CONFIDE_KEEP_ALIVE_SECONDS``.

A server that closes an idle connection while the client sends its next request on it makes
that request fail with a reset. With uvicorn's 5 s, ``bench/load.py`` and ``bench/crash.py``
saw up to one request in a thousand on SQLite fail so (``ReadError``); clients and load
balancers must be the ones to close idle connections, so the service waits longer than
they do.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from confide.testing.processes import confide_env, serve

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: confide\r\n\r\n"


def _idle_seconds_until_closed(base: str, wait: float) -> float | None:
    """Send one request, read its answer, then how long the idle connection stays open
    (``None``: still open after ``wait`` seconds)."""
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=30) as sock:
        sock.sendall(REQUEST)
        answer = b""
        while b'"ok"' not in answer:
            answer += sock.recv(4096)
        sock.settimeout(wait)
        start = time.monotonic()
        try:
            closed = sock.recv(4096) == b""  # the server's close ends the wait at once
        except TimeoutError:
            return None
        assert closed
        return time.monotonic() - start


@pytest.mark.parametrize(("setting", "open_past_6s"), [(None, True), ("1", False)])
def test_idle_connections_stay_open_for_the_keep_alive_setting(
    setting: str | None, open_past_6s: bool, tmp_path: Path
) -> None:
    values = {
        "CONFIDE_HOME": str(tmp_path / "home"),
        "MEMORY_ENCRYPTION_KEY": "88" * 32,
        "CONFIDE_EMBEDDER": "none",
    }
    if setting is not None:
        values["CONFIDE_KEEP_ALIVE_SECONDS"] = setting
    with serve(confide_env(values)) as server:
        closed_after = _idle_seconds_until_closed(server.wait_ready(), wait=6.0)
    if open_past_6s:  # the default outlasts uvicorn's 5 s and common client timeouts
        assert closed_after is None
    else:
        assert closed_after is not None and closed_after < 6.0
