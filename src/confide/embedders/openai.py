"""An embedder for any OpenAI-compatible ``/v1/embeddings`` endpoint, over httpx."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from confide.embedders.base import Vector, Vectors, l2_normalise
from confide.errors import ProviderError

__all__ = ["OpenAICompatibleEmbedder"]


class OpenAICompatibleEmbedder:
    """Calls ``POST {base_url}/embeddings`` in batches and normalises the vectors.

    ``dims`` is learned from the first answer when not given. Transport errors, HTTP errors
    and malformed answers raise :class:`confide.errors.ProviderError` (never with the text).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None = None,
        dims: int | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
        client: httpx.Client | None = None,
    ) -> None:
        """Configure the endpoint; pass ``client`` to share a connection pool."""
        self._model = model
        self._dims = dims
        self.batch_size = batch_size
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout)
        self._url = base_url.rstrip("/") + "/embeddings"
        self._headers = headers

    def close(self) -> None:
        """Close the connection pool (unless it was passed in)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> OpenAICompatibleEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def model_id(self) -> str:
        """The remote model name."""
        return self._model

    @property
    def dims(self) -> int:
        """Vector length; asks the endpoint once when it was not configured."""
        if self._dims is None:
            self._dims = int(self.embed(["dimension probe"]).shape[1])
        return self._dims

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts, ``batch_size`` per request."""
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        parts = [
            self._request(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        out = l2_normalise(np.concatenate(parts, axis=0))
        if self._dims is None:
            self._dims = int(out.shape[1])
        elif out.shape[1] != self._dims:
            raise ProviderError(f"endpoint returned {out.shape[1]} dimensions, not {self._dims}")
        return out

    def embed_one(self, text: str) -> Vector:
        """Embed one text."""
        row: Vector = self.embed([text])[0]
        return row

    def _request(self, batch: list[str]) -> Vectors:
        try:
            response = self._client.post(
                self._url, json={"model": self._model, "input": batch}, headers=self._headers
            )
            response.raise_for_status()
            payload: Any = response.json()
        except httpx.HTTPStatusError as exc:
            raise ProviderError(
                f"embedding endpoint answered HTTP {exc.response.status_code}"
            ) from None
        except (httpx.HTTPError, ValueError) as exc:
            raise ProviderError(f"embedding endpoint failed: {type(exc).__name__}") from None
        try:
            rows = sorted(payload["data"], key=lambda row: int(row["index"]))
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise ProviderError("embedding endpoint returned a malformed answer") from None
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            raise ProviderError("embedding endpoint returned the wrong number of vectors")
        return vectors
