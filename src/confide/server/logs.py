"""Logs: one JSON object per line, with only the fields this module names, or a plain access
line; either way a request is logged by its route template, never its path.

:class:`JsonFormatter` writes ``ts``, ``level``, ``logger`` and ``message`` plus the
allow-listed request fields (``method``, ``route``, ``status``, ``ms``); any other attribute
a record carries is dropped, so a value or a transcript attached to a record by mistake never
reaches the output. Confide's own messages carry counts, ids and class names only.

:func:`text_access_log` is the access log of ``confide serve`` without ``--json-logs``: the
same request fields as a line (``INFO:     POST /v1/users/{user_id} 200 3.1 ms``), in place
of uvicorn's, which writes the raw path and query and so the user, conversation and memory
ids in them.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

__all__ = ["ACCESS_LOGGER", "AccessLineFormatter", "JsonFormatter", "access_log", "text_access_log"]

ACCESS_LOGGER = "confide.access"
_FIELDS = ("method", "route", "status", "ms")
_access = logging.getLogger(ACCESS_LOGGER)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line of allow-listed fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as JSON (exception text is reduced to the exception's class name)."""
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info and record.exc_info[0] is not None:
            entry["error"] = record.exc_info[0].__name__
        return json.dumps(entry, separators=(",", ":"))


def access_log(*, method: str, route: str, status: int, ms: float) -> None:
    """Log one request (route template, never the path) to ``confide.access``."""
    if _access.isEnabledFor(logging.INFO):
        _access.info(
            "request",
            extra={"method": method, "route": route, "status": status, "ms": round(ms, 2)},
        )


class AccessLineFormatter(logging.Formatter):
    """Formats an access record as ``INFO:     <method> <route template> <status> <ms> ms``
    (uvicorn's layout without the client address, the path or the query)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (a record without the request fields: its message)."""
        level = f"{record.levelname}:".ljust(10)
        if not all(hasattr(record, name) for name in _FIELDS):
            return level + record.getMessage()
        fields = record.__dict__
        return (
            f"{level}{fields['method']} {fields['route']} {fields['status']} "
            f"{float(fields['ms']):.1f} ms"
        )


def text_access_log(stream: TextIO | None = None) -> None:
    """Write ``confide.access`` lines to ``stream`` (standard error by default) as
    :class:`AccessLineFormatter` formats them, and to nowhere else."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(AccessLineFormatter())
    _access.handlers[:] = [handler]
    _access.setLevel(logging.INFO)
    _access.propagate = False
