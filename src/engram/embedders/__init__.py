"""Embedders: the protocol, providers (local MiniLM, OpenAI-compatible) and the registry.

Providers import their heavy dependencies lazily, on first use.
"""

from engram.embedders.base import Embedder, embedder_signature, l2_normalise
from engram.embedders.cache import CachedEmbedder
from engram.embedders.registry import (
    PROVIDERS,
    EmbedderOptions,
    build_embedder,
    configured_embedder,
    embedder_from_settings,
)

__all__ = [
    "PROVIDERS",
    "CachedEmbedder",
    "Embedder",
    "EmbedderOptions",
    "build_embedder",
    "configured_embedder",
    "embedder_from_settings",
    "embedder_signature",
    "l2_normalise",
]
