"""The :class:`Embedder` protocol and helpers shared by every provider."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

__all__ = ["Embedder", "Vector", "Vectors", "embedder_signature", "l2_normalise"]

Vector = NDArray[np.float32]
"""One embedding, shape ``(dims,)``."""
Vectors = NDArray[np.float32]
"""A batch of embeddings, shape ``(n, dims)``."""


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    ``embed`` returns shape ``(len(texts), dims)``; an empty input gives shape ``(0, dims)``.
    Providers raise :class:`confide.errors.ProviderError` when the model or endpoint fails.
    """

    @property
    def model_id(self) -> str:
        """Name of the model, e.g. ``all-MiniLM-L6-v2``."""
        ...

    @property
    def dims(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed a batch of texts."""
        ...

    def embed_one(self, text: str) -> Vector:
        """Embed one text (the query path)."""
        ...


def embedder_signature(embedder: Embedder) -> str:
    """The ``model_id:dims`` string stored beside every vector this embedder makes."""
    return f"{embedder.model_id}:{embedder.dims}"


def l2_normalise(vectors: NDArray[np.floating]) -> Vectors:
    """Return float32 rows scaled to unit length (zero rows stay zero)."""
    out = np.asarray(vectors, dtype=np.float32)
    if out.ndim == 1:
        out = out.reshape(1, -1)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)
