"""``Engram``: the engine with retrieval wired in, as configured — the SDK's entry point."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from engram.config import Settings
from engram.embedders import Embedder, build_embedder
from engram.engine import MemoryEngine
from engram.errors import ProviderError
from engram.index.vectors import VectorIndexer
from engram.retrieval.access import AccessTracker
from engram.retrieval.budget import token_counter
from engram.retrieval.categories import load_categories
from engram.retrieval.memory_query import (
    MemoryQueryRequest,
    MemoryQueryResult,
    MemoryQueryService,
)
from engram.storage.base import Capability

log = logging.getLogger(__name__)

_WARM_UP_TEXT = "Engram warm-up."


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

    def warm_up(self, progress: Callable[[str], None] | None = None) -> None:
        """Load now what the first call would otherwise load on its way.

        That is the embedder's model (one embedding of a fixed text: no user data), the
        in-process vector index's compiled loops and the token counter. ``progress``
        receives a line before and after (names and seconds only); by default they are
        logged. A failing embedder provider is logged, not raised: the first call tries
        again and reports it.
        """
        say = progress or log.info
        start = time.perf_counter()
        if self.embedder is not None:
            say(f"loading embedder {self.embedder.model_id} …")
            try:
                self.embedder.embed([_WARM_UP_TEXT])
            except ProviderError as exc:
                log.warning("embedder warm-up failed: %s", type(exc).__name__)
        if Capability.IN_PROCESS_VECTORS in self.engine.storage.capabilities:
            from engram.storage.sqlite_vectors import warm_up

            warm_up(self.embedder.dims if self.embedder is not None else 384)
        token_counter()
        say(f"warm-up done in {time.perf_counter() - start:.1f} s")

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
