"""Catch storage work done on the event loop while a request is being handled.

The engine is synchronous; an async door must off-load every storage call (through
:class:`confide.gate.AsyncGate` or ``asyncio.to_thread``), or one slow query stalls every
other request the process serves. :class:`LoopGuard` makes that checkable without timing
anything: it wraps the ASGI app so the handling of each request is marked (a context
variable, which ``asyncio.to_thread`` and the tasks a request spawns inherit), and wraps the
storage's two ways in (a read connection and a write transaction) so that each one opened on
a thread that is running an event loop, during a marked request, is recorded with the code
that opened it. Work off-loaded to a thread runs where no loop runs, and passes.
"""

from __future__ import annotations

import asyncio
import contextvars
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["LoopGuard"]

_handling: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "confide_handling_request", default=None
)
_ENTRY_POINTS = ("_open_reader", "transaction")


class LoopGuard:
    """Records storage calls made on the event loop while the wrapped app handles a request.

    Args:
        storage: the storage (or key store) whose read and write entry points to watch;
            more can be added with :meth:`watch`.
    """

    def __init__(self, *storages: object) -> None:
        self.blocking: list[str] = []
        """One line per storage call made on the loop: the request and the calling code."""
        for storage in storages:
            self.watch(storage)

    def watch(self, storage: object) -> None:
        """Wrap ``storage``'s read connection and write transaction on this instance."""
        for name in _ENTRY_POINTS:
            original = getattr(storage, name, None)
            if callable(original):
                setattr(storage, name, self._guarded(original))

    def app(self, app: Callable[..., Any]) -> Callable[..., Any]:
        """``app`` (an ASGI app) with every request it handles marked."""

        async def marked(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope.get("type") not in ("http", "websocket"):
                await app(scope, receive, send)
                return
            token = _handling.set(f"{scope.get('method', 'WS')} {scope.get('path')}")
            try:
                await app(scope, receive, send)
            finally:
                _handling.reset(token)

        return marked

    def _guarded(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            request = _handling.get()
            if request is not None and _on_loop():
                self.blocking.append(f"{request}: {_caller()}")
            return original(*args, **kwargs)

        return guarded


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _caller() -> str:
    """The innermost Confide frames above the storage, as ``module:function`` names."""
    frames = [
        f"{frame.filename.rsplit('/confide/', 1)[-1]}:{frame.name}"
        for frame in traceback.extract_stack()[:-3]
        if "/confide/" in frame.filename
        and "/confide/storage/" not in frame.filename
        and "/confide/testing/" not in frame.filename
    ]
    return " < ".join(reversed(frames[-3:]))
