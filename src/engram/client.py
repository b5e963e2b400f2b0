"""``Engram``: the whole engine as configured, and :meth:`Engram.open`, the one wiring.

:meth:`Engram.open` builds everything an entry point needs from :class:`Settings`: the
storage and the key store with the key ring (through :meth:`MemoryEngine.open`), the
embedder and the indexers that keep its vectors, the categories and agent allowlists for
``memory_query``, and the end-of-session extractor (the configured LLM, or offline). The SDK,
``create_app``, the CLI and background workers all start from it.
"""

from __future__ import annotations

from typing import Any

from engram.config import Settings
from engram.conversation.extraction import Extractor
from engram.conversation.summarizer import extractor_from_settings
from engram.embedders import Embedder, embedder_from_settings
from engram.engine import MemoryEngine
from engram.index.vectors import VectorIndexer
from engram.retrieval.access import AccessTracker
from engram.retrieval.categories import load_categories
from engram.retrieval.memory_query import (
    MemoryQueryRequest,
    MemoryQueryResult,
    MemoryQueryService,
)

__all__ = ["Engram"]


class Engram:
    """A memory engine plus hybrid retrieval (``memory_query``) and extraction.

    ``engine`` offers every store operation; :meth:`query` answers ``memory_query``;
    ``extractor`` turns a finished conversation into memories.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        *,
        embedder: Embedder | None,
        settings: Settings | None = None,
        extractor: Extractor | None = None,
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
        self.extractor = extractor or extractor_from_settings(self.settings)
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
        """Build a ready Engram from ``settings`` (from the environment when omitted).

        Opens and migrates the storage, opens the key store and key ring, builds the
        configured embedder and extractor. Raises :class:`~engram.errors.ConfigurationError`
        for a configuration that cannot work (see :meth:`MemoryEngine.open`).
        """
        settings = settings or Settings()
        embedder = embedder_from_settings(settings)
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
