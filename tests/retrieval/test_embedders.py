"""Embedder registry, LRU cache and the OpenAI-compatible provider over a loopback server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from confide.config import Settings
from confide.embedders import (
    CachedEmbedder,
    Embedder,
    build_embedder,
    embedder_from_settings,
    embedder_signature,
)
from confide.embedders.base import Vector
from confide.embedders.local import LocalMiniLMEmbedder
from confide.embedders.openai import OpenAICompatibleEmbedder
from confide.errors import ConfigurationError, ProviderError
from confide.testing.embedders import HashingEmbedder


def test_none_spec_builds_nothing() -> None:
    assert build_embedder("none") is None
    assert build_embedder("  ") is None


@pytest.mark.parametrize(
    "spec", ["bogus:model", "local", "local:other-model", "openai:model", "openai:m@ftp://x"]
)
def test_bad_specs_are_refused(spec: str) -> None:
    with pytest.raises(ConfigurationError):
        build_embedder(spec)


def test_local_spec_is_lazy_and_cached(tmp_path: Any) -> None:
    embedder = build_embedder("local:all-MiniLM-L6-v2", home=tmp_path)
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, LocalMiniLMEmbedder)
    assert embedder_signature(embedder) == "all-MiniLM-L6-v2:384"
    assert not embedder.inner.loaded  # nothing loaded yet


@pytest.mark.parametrize("precision", ["int8", "float32"])
def test_precision_setting_picks_the_question_graph(
    precision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFIDE_EMBEDDER_PRECISION", precision)
    embedder = embedder_from_settings(Settings())
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, LocalMiniLMEmbedder)
    assert embedder.inner.precision == precision


def test_unknown_precision_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFIDE_EMBEDDER_PRECISION", "int4")
    with pytest.raises(ConfigurationError, match="CONFIDE_EMBEDDER_PRECISION"):
        Settings()


def test_lru_cache_serves_repeats_and_evicts() -> None:
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, max_entries=2)
    assert isinstance(cached, Embedder)
    first = cached.embed(["alpha"])[0]
    np.testing.assert_array_equal(cached.embed(["alpha"])[0], first)
    assert inner.calls == [1]
    batch = cached.embed(["alpha", "beta", "gamma"])
    assert inner.calls == [1, 2]  # only beta and gamma were computed
    np.testing.assert_array_equal(batch[0], first)
    cached.embed(["alpha"])  # evicted by beta and gamma
    assert inner.calls == [1, 2, 1]
    assert cached.embed([]).shape == (0, inner.dims)


class _QuestionsApart(HashingEmbedder):
    """Embeds a lone question another way than a batch, as the local model's int8 graph does."""

    def __init__(self) -> None:
        super().__init__()
        self.questions: list[str] = []

    def embed_one(self, text: str) -> Vector:
        self.questions.append(text)
        row: Vector = -super().embed([text])[0]
        return row


def test_cache_asks_a_lone_question_of_the_question_path() -> None:
    inner = _QuestionsApart()
    cached = CachedEmbedder(inner, max_entries=8)
    stored = cached.embed(["alpha"])[0]
    asked = cached.embed_one("alpha")  # not the batch's cached vector
    np.testing.assert_array_equal(asked, -stored)
    np.testing.assert_array_equal(cached.embed_one("alpha"), asked)
    np.testing.assert_array_equal(cached.embed(["alpha"])[0], stored)
    assert inner.questions == ["alpha"] and inner.calls == [1, 1]
    assert (cached.hits, cached.misses) == (2, 2)


class _EmbeddingsServer:
    """A loopback /v1/embeddings server answering from a function of the request."""

    def __init__(self, answer: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["_auth"] = self.headers.get("Authorization")
                body["_path"] = self.path
                outer.requests.append(body)
                status, payload = answer(body)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[_EmbeddingsServer]:
    srv = _EmbeddingsServer(request.param)
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _vectors(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data = [
        {"index": i, "embedding": [float(len(text)), 1.0, 0.0]}
        for i, text in enumerate(body["input"])
    ]
    return 200, {"data": list(reversed(data)), "model": body["model"]}


@pytest.mark.parametrize("server", [_vectors], indirect=True)
def test_openai_compatible_batches_orders_and_normalises(server: _EmbeddingsServer) -> None:
    embedder = build_embedder(
        f"openai:test-model@{server.base_url}", api_key="sk-test", cache_size=0
    )
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    embedder.batch_size = 2
    out = embedder.embed(["a", "bbb", "cc"])
    assert out.shape == (3, 3) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    expected = np.array([[1, 1, 0], [3, 1, 0], [2, 1, 0]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert [len(r["input"]) for r in server.requests] == [2, 1]
    assert server.requests[0]["_auth"] == "Bearer sk-test"
    assert server.requests[0]["_path"] == "/v1/embeddings"
    assert embedder.dims == 3
    assert embedder.model_id == "test-model"


@pytest.mark.parametrize(
    "server",
    [lambda body: (503, {"error": "busy"}), lambda body: (200, {"nothing": []})],
    indirect=True,
)
def test_openai_compatible_errors_become_provider_errors(server: _EmbeddingsServer) -> None:
    with (
        OpenAICompatibleEmbedder(model="m", base_url=server.base_url, dims=3) as embedder,
        pytest.raises(ProviderError) as info,
    ):
        embedder.embed_one("private text")
    assert "private text" not in str(info.value)


def test_unreachable_endpoint_is_a_provider_error() -> None:
    with (
        OpenAICompatibleEmbedder(model="m", base_url="http://127.0.0.1:9/v1", dims=3) as embedder,
        pytest.raises(ProviderError),
    ):
        embedder.embed(["x"])


def test_importing_retrieval_loads_no_heavy_vendor() -> None:
    code = (
        "import sys, confide.retrieval, confide.embedders.local;"
        "heavy = {'torch', 'sentence_transformers', 'onnxruntime', 'transformers', 'tokenizers',"
        " 'tiktoken'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
