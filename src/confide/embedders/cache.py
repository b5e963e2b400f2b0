"""An in-process LRU cache in front of any embedder, for repeated queries."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from confide.embedders.base import Embedder, Vector, Vectors

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """Wraps an :class:`Embedder` and remembers the vectors of recent texts.

    Keys are SHA-256 digests, so the cache never holds the texts themselves. Thread-safe.
    :meth:`embed_one` asks the wrapped embedder's ``embed_one`` and caches apart from
    :meth:`embed`: a provider may embed a lone question another way than a batch (the local
    model's int8 graph).
    """

    def __init__(self, inner: Embedder, *, max_entries: int = 1024) -> None:
        """Cache up to ``max_entries`` vectors of ``inner``."""
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.inner = inner
        self.max_entries = max_entries
        self._entries: OrderedDict[bytes, Vector] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        """The wrapped embedder's model id."""
        return self.inner.model_id

    @property
    def dims(self) -> int:
        """The wrapped embedder's dimensions."""
        return self.inner.dims

    def close(self) -> None:
        """Close the wrapped embedder's connections, if it holds any."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts, asking the wrapped embedder only for those not cached."""
        return self._cached(texts, self.inner.embed, b"")

    def embed_one(self, text: str) -> Vector:
        """Embed one text, from the cache when possible."""

        def one(texts: Sequence[str]) -> Vectors:
            return np.stack([self.inner.embed_one(texts[0])])

        row: Vector = self._cached([text], one, b"one\0")[0]
        return row

    def _cached(
        self, texts: Sequence[str], compute: Callable[[Sequence[str]], Vectors], kind: bytes
    ) -> Vectors:
        keys = [hashlib.sha256(kind + t.encode("utf-8")).digest() for t in texts]
        found: dict[int, Vector] = {}
        with self._lock:
            for i, key in enumerate(keys):
                vec = self._entries.get(key)
                if vec is not None:
                    self._entries.move_to_end(key)
                    found[i] = vec
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        missing = [i for i in range(len(texts)) if i not in found]
        if missing:
            fresh = compute([texts[i] for i in missing])
            with self._lock:
                for row, i in enumerate(missing):
                    vec = fresh[row].copy()
                    vec.setflags(write=False)
                    found[i] = vec
                    self._entries[keys[i]] = vec
                    self._entries.move_to_end(keys[i])
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return np.stack([found[i] for i in range(len(texts))]).astype(np.float32, copy=False)
