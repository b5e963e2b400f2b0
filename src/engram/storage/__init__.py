"""Storage backends behind one protocol, chosen by URL."""

from __future__ import annotations

from collections.abc import Callable

from engram.errors import ConfigurationError
from engram.storage.base import Capability, Storage

__all__ = ["Capability", "Storage", "open_storage", "register_backend"]

_BACKENDS: dict[str, Callable[[str], Storage]] = {}


def register_backend(scheme: str, factory: Callable[[str], Storage]) -> None:
    """Make ``scheme://...`` URLs open with ``factory``."""
    _BACKENDS[scheme] = factory


def _sqlite(url: str) -> Storage:
    from engram.storage.sqlite import SqliteStorage

    return SqliteStorage(url.split("://", 1)[1].removeprefix("/") or ":memory:")


def _postgres(url: str) -> Storage:
    from engram.storage.postgres import PostgresStorage

    return PostgresStorage(url)


register_backend("sqlite", _sqlite)
register_backend("postgresql", _postgres)
register_backend("postgres", _postgres)


def open_storage(url: str) -> Storage:
    """Open (and migrate) the storage at ``url``: ``sqlite:///path`` or ``postgresql://...``."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    try:
        factory = _BACKENDS[scheme]
    except KeyError:
        raise ConfigurationError(
            f"unknown storage URL scheme {scheme!r}; use sqlite:///path or postgresql://..."
        ) from None
    storage = factory(url)
    storage.migrate()
    return storage
