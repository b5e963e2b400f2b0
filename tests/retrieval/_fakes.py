"""A deterministic bag-of-words embedder for tests where semantics do not matter."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from engram.embedders import l2_normalise
from engram.index.tokenize import terms


class HashingEmbedder:
    """Each term sets one of ``dims`` buckets; counts calls so caching can be observed."""

    model_id = "hashing"
    dims = 64

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in terms(text) or ["<empty>"]:
                out[row, hashlib.sha256(term.encode()).digest()[0] % self.dims] += 1.0
        return l2_normalise(out) if texts else out

    def embed_one(self, text: str) -> np.ndarray:
        row: np.ndarray = self.embed([text])[0]
        return row
