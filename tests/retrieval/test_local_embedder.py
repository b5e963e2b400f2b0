"""The real local MiniLM: ONNX export matches sentence-transformers; semantics hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engram.embedders.local import LocalMiniLMEmbedder

pytestmark = pytest.mark.slow

SENTENCES = [
    "Caroline went to an LGBTQ support group yesterday.",
    "Melanie painted a sunrise over the lake in 2022.",
    "What did Caroline research?",
    "ok",
    "A much longer sentence " * 60,  # beyond the 256-token limit: truncated identically
]


@pytest.fixture(scope="module")
def onnx_embedder(tmp_path_factory: pytest.TempPathFactory) -> LocalMiniLMEmbedder:
    embedder = LocalMiniLMEmbedder(cache_dir=tmp_path_factory.mktemp("models"), backend="onnx")
    embedder.embed_one("load")
    return embedder


def test_onnx_matches_sentence_transformers(onnx_embedder: LocalMiniLMEmbedder) -> None:
    reference = LocalMiniLMEmbedder(backend="torch").embed(SENTENCES)
    fast = onnx_embedder.embed(SENTENCES)
    assert onnx_embedder.active_backend == "onnx"
    assert fast.shape == (len(SENTENCES), 384) and fast.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, rtol=1e-5)
    cosines = (fast * reference).sum(axis=1)
    assert cosines.min() >= 0.999


def test_batches_match_single_embeddings(onnx_embedder: LocalMiniLMEmbedder) -> None:
    batch = onnx_embedder.embed(SENTENCES)
    for row, text in enumerate(SENTENCES):
        assert float(batch[row] @ onnx_embedder.embed_one(text)) >= 0.9999


def test_exported_graph_is_reused(onnx_embedder: LocalMiniLMEmbedder) -> None:
    assert onnx_embedder.cache_dir is not None
    graph = onnx_embedder.cache_dir / "all-MiniLM-L6-v2" / "model.onnx"
    assert graph.is_file()
    again = LocalMiniLMEmbedder(cache_dir=Path(onnx_embedder.cache_dir))
    np.testing.assert_allclose(
        again.embed_one(SENTENCES[0]), onnx_embedder.embed_one(SENTENCES[0]), atol=1e-6
    )
    assert again.active_backend == "onnx"


def test_similar_sentences_are_closer(onnx_embedder: LocalMiniLMEmbedder) -> None:
    query, near, far = onnx_embedder.embed(
        ["Which pet does Ann have?", "Ann adopted a beagle puppy.", "The stock market fell."]
    )
    assert float(query @ near) > float(query @ far) + 0.1
