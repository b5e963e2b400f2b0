"""Structured logs: one JSON object per line, with only the fields this module names.

:class:`JsonFormatter` writes ``ts``, ``level``, ``logger`` and ``message`` plus the
allow-listed request fields (``method``, ``route``, ``status``, ``ms``); any other attribute
a record carries is dropped, so a value or a transcript attached to a record by mistake never
reaches the output. Confide's own messages carry counts, ids and class names only.
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["ACCESS_LOGGER", "JsonFormatter", "access_log"]

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
