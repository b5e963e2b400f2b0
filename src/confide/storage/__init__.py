"""Storage backends behind one protocol, chosen by URL."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confide.config import Settings
from confide.errors import ConfigurationError
from confide.storage.base import Capability, Storage
from confide.storage.features import FEATURES
from confide.storage.migrations import HNSW_EF_SEARCH
from confide.storage.schema import Feature

__all__ = [
    "FEATURES",
    "Capability",
    "Storage",
    "open_storage",
    "register_backend",
    "storage_from_settings",
]

StorageFactory = Callable[..., Storage]
"""``factory(url, *, pool_min=..., pool_max=..., ef_search=..., features=...)``: a backend
ignores options it has no use for (SQLite has no pool); ``features`` are the tables it keeps
beside the memory store's (:data:`FEATURES`)."""

_BACKENDS: dict[str, StorageFactory] = {}


def register_backend(scheme: str, factory: StorageFactory) -> None:
    """Make ``scheme://...`` URLs open with ``factory``."""
    _BACKENDS[scheme] = factory


def _sqlite(url: str, *, features: Sequence[Feature] = (), **_options: int) -> Storage:
    from confide.storage.sqlite import SqliteStorage

    path = url.split("://", 1)[1].removeprefix("/") or ":memory:"
    return SqliteStorage(path, features=features)


def _postgres(
    url: str,
    *,
    pool_min: int = 1,
    pool_max: int = 8,
    ef_search: int = HNSW_EF_SEARCH,
    features: Sequence[Feature] = (),
) -> Storage:
    from confide.storage.postgres import PostgresStorage

    return PostgresStorage(
        url,
        min_size=pool_min,
        max_size=max(pool_min, pool_max),
        ef_search=ef_search,
        features=features,
    )


register_backend("sqlite", _sqlite)
register_backend("postgresql", _postgres)
register_backend("postgres", _postgres)


def open_storage(
    url: str, *, pool_min: int = 1, pool_max: int = 8, ef_search: int = HNSW_EF_SEARCH
) -> Storage:
    """Open (and migrate) the storage at ``url``: ``sqlite:///path`` or ``postgresql://...``,
    with the tables of every feature (:data:`FEATURES`).

    ``pool_min``/``pool_max`` size PostgreSQL's connection pool; ``ef_search`` is its
    ``hnsw.ef_search``.
    """
    scheme = url.split("://", 1)[0] if "://" in url else ""
    try:
        factory = _BACKENDS[scheme]
    except KeyError:
        raise ConfigurationError(
            f"unknown storage URL scheme {scheme!r}; use sqlite:///path or postgresql://..."
        ) from None
    storage = factory(
        url, pool_min=pool_min, pool_max=pool_max, ef_search=ef_search, features=FEATURES
    )
    storage.migrate()
    return storage


def storage_from_settings(settings: Settings) -> Storage:
    """Open (and migrate) the configured storage, its pool sized by ``settings``."""
    return open_storage(
        settings.resolved_storage_url(),
        pool_min=settings.postgres_pool_min,
        pool_max=settings.postgres_pool_max,
        ef_search=settings.postgres_ef_search,
    )
