"""``Engram``: the engine with retrieval wired in, as configured — the SDK's entry point."""

from __future__ import annotations

from typing import Any

from engram.config import Settings
from engram.embedders import Embedder, build_embedder
from engram.engine import MemoryEngine
from engram.index.vectors import VectorIndexer
from engram.retrieval.access import AccessTracker
from engram.retrieval.categories import load_categories
from engram.retrieval.memory_query import (
    MemoryQueryRequest,
    MemoryQueryResult,
    MemoryQueryService,
)


class Engram:
    """A memory engine plus hybrid retrieval (``memory_query``), built from :class:`Settings`.

    ``engine`` offers every store operation; :meth:`query` answers ``memory_query``.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        embedder: Embedder | None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or engine.settings
        self.engine = engine
        self.embedder = embedder
        if embedder is not None:
            engine.add_indexer(
                VectorIndexer(
                    engine.storage,
                    embedder,
                    link_top_k=self.settings.link_top_k,
                    link_min=self.settings.link_min,
                )
            )
        self.access = AccessTracker(engine.storage)
        self.memory_query = MemoryQueryService(
            engine,
            load_categories(self.settings.categories_file),
            embedder=embedder,
            weights=self.settings.ranking,
            access=self.access,
        )

    @classmethod
    def open(cls, settings: Settings | None = None) -> Engram:
        """Open storage, keys and the configured embedder."""
        settings = settings or Settings()
        api_key = settings.embedder_api_key
        embedder = build_embedder(
            settings.embedder,
            home=settings.home,
            api_key=None if api_key is None else api_key.get_secret_value(),
        )
        return cls(MemoryEngine.open(settings), embedder=embedder, settings=settings)

    def query(self, request: MemoryQueryRequest | dict[str, Any]) -> MemoryQueryResult:
        """Answer a ``memory_query`` request."""
        return self.memory_query.query(request)

    def close(self) -> None:
        """Flush access times and release the storage."""
        self.access.close()
        self.engine.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
