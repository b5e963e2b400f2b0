"""Deterministic fake embedders, for tests where the meaning of the vectors does not matter.

Both satisfy :class:`confide.embedders.Embedder` without a model: :class:`HashingEmbedder`
gives texts that share words similar vectors, :class:`RandomEmbedder` gives random unit
vectors (for tests that write their own vectors afterwards). Where ranking quality matters,
use the real local embedder instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from confide.embedders.base import Vector, Vectors, l2_normalise
from confide.index.tokenize import terms

__all__ = ["HashingEmbedder", "RandomEmbedder"]


class HashingEmbedder:
    """A bag of words: each term adds one to a bucket chosen by its hash, then the row is
    L2-normalised (an empty text counts as one ``<empty>`` term).

    The same text always gives the same vector, in any process. ``calls`` records the batch
    size of every ``embed`` call, so a test can see what a cache saved.

    Args:
        model_id: the name recorded with stored vectors.
        dims: the vector length.
    """

    def __init__(self, model_id: str = "hashing", dims: int = 64) -> None:
        self.model_id = model_id
        self.dims = dims
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Vectors of ``texts``, shape ``(len(texts), dims)``."""
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in terms(text) or ["<empty>"]:
                digest = hashlib.sha256(term.encode()).digest()
                out[row, int.from_bytes(digest[:4], "big") % self.dims] += 1.0
        return l2_normalise(out) if len(texts) else out

    def embed_one(self, text: str) -> Vector:
        """The vector of one text."""
        row: Vector = self.embed([text])[0]
        return row


class RandomEmbedder:
    """Random unit vectors from a seeded generator, whatever the text.

    The sequence is the same for every instance with one seed, but a text's vector depends
    on how many were drawn before it: use it where the test replaces or ignores the vectors.

    Args:
        model_id: the name recorded with stored vectors.
        dims: the vector length.
        seed: the generator's seed.
    """

    def __init__(self, model_id: str = "fake", dims: int = 16, *, seed: int = 0) -> None:
        self.model_id = model_id
        self.dims = dims
        self._rng = np.random.default_rng(seed)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One fresh random unit vector per text, shape ``(len(texts), dims)``."""
        return np.array([self.embed_one(text) for text in texts], np.float32).reshape(-1, self.dims)

    def embed_one(self, text: str) -> Vector:
        """One fresh random unit vector."""
        return unit_vector(self._rng, self.dims)


def unit_vector(rng: np.random.Generator, dims: int) -> Vector:
    """A random float32 vector of length one, drawn from ``rng``."""
    v = rng.standard_normal(dims).astype(np.float32)
    unit: Vector = v / np.linalg.norm(v)
    return unit
