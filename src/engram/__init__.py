"""Engram: long-term memory for LLM agents — private, fast and correct.

The engine, the SDK client and the asyncio wrapper are imported on first use (PEP 562), so
``import engram`` (and the ``engram`` command's start-up) loads no NumPy or model runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engram.config import Settings
from engram.errors import (
    ConflictError,
    EngramError,
    IntegrityError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from engram.types import (
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
    from engram.async_engine import AsyncMemoryEngine
    from engram.client import Engram, SearchResult
    from engram.engine import MemoryEngine

_LAZY = {
    "AsyncMemoryEngine": "engram.async_engine",
    "Engram": "engram.client",
    "SearchResult": "engram.client",
    "MemoryEngine": "engram.engine",
}

__all__ = [
    "AsyncMemoryEngine",
    "ConflictError",
    "Engram",
    "EngramError",
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
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
