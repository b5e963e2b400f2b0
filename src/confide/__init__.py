"""Confide: long-term memory for LLM agents — private, fast and correct.

The engine, the SDK client and the asyncio wrapper are imported on first use (PEP 562), so
``import confide`` (and the ``confide`` command's start-up) loads no NumPy or model runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from confide.config import Settings
from confide.errors import (
    ConfideError,
    ConflictError,
    IntegrityError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from confide.types import (
    AddResult,
    HistoryEvent,
    HistoryEventType,
    Memory,
    MemoryFilter,
    MemoryPatch,
    MemoryState,
    MemoryType,
    NewMemory,
    Source,
    Visibility,
)

if TYPE_CHECKING:
    from confide.async_engine import AsyncMemoryEngine
    from confide.client import AsyncConfide, Confide, SearchResult
    from confide.engine import MemoryEngine

_LAZY = {
    "AsyncMemoryEngine": "confide.async_engine",
    "AsyncConfide": "confide.client",
    "Confide": "confide.client",
    "SearchResult": "confide.client",
    "MemoryEngine": "confide.engine",
}

__all__ = [
    "AddResult",
    "AsyncConfide",
    "AsyncMemoryEngine",
    "Confide",
    "ConfideError",
    "ConflictError",
    "HistoryEvent",
    "HistoryEventType",
    "IntegrityError",
    "Memory",
    "MemoryEngine",
    "MemoryFilter",
    "MemoryPatch",
    "MemoryState",
    "MemoryType",
    "NewMemory",
    "NotFoundError",
    "PermissionDeniedError",
    "SearchResult",
    "Settings",
    "Source",
    "ValidationError",
    "Visibility",
]


def __getattr__(name: str) -> Any:
    """Import the engine, the client and the asyncio wrapper when first asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'confide' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
