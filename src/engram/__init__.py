"""Engram: long-term memory for LLM agents — private, fast and correct."""

from engram.async_engine import AsyncMemoryEngine
from engram.client import Engram
from engram.config import Settings
from engram.engine import MemoryEngine
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
    "Settings",
    "Source",
    "ValidationError",
    "Visibility",
]
