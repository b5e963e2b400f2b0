"""Embedders: the protocol, providers (local MiniLM, OpenAI-compatible) and the registry.

Providers import their heavy dependencies lazily, on first use.
"""

from confide.embedders.base import Embedder, embedder_signature, l2_normalise
from confide.embedders.cache import CachedEmbedder
from confide.embedders.registry import (
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
