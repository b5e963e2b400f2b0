"""Serve an ASGI app with uvicorn on a loopback socket, for tests and benchmarks."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_on_loopback(app: Any) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 (a free port) and yield its base URL; stop it on exit.

    The socket is bound and listening before uvicorn starts, so connections queue until it
    accepts them: there is no start-up race to wait out.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    host, port = sock.getsockname()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
