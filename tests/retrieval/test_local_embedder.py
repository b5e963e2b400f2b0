"""The real local MiniLM: the shipped ONNX graph matches sentence-transformers; semantics hold.

The reference vectors in ``tests/fixtures/minilm_golden.json`` were made once with
sentence-transformers (``tests/fixtures/make_minilm_golden.py``); this test needs neither it nor
torch, and runs with the hub switched off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from confide.embedders import local as local_module
from confide.embedders.local import LocalMiniLMEmbedder, minilm_model_dir
from confide.errors import ProviderError

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_golden.json"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLMEmbedder:
    embedder = LocalMiniLMEmbedder()
    embedder.embed_one("load")
    return embedder


def test_golden_fixture_is_varied(golden: dict[str, Any]) -> None:
    sentences = golden["sentences"]
    assert len(sentences) >= 20 and len(golden["vectors"]) == len(sentences)
    assert max(golden["tokens_before_truncation"]) > golden["max_seq_length"] == 256
    assert any(not s.strip() for s in sentences)
    assert any(not s.isascii() for s in sentences)


def test_matches_sentence_transformers(
    embedder: LocalMiniLMEmbedder, golden: dict[str, Any]
) -> None:
    reference = np.asarray(golden["vectors"], dtype=np.float32)
    vectors = embedder.embed(golden["sentences"])
    assert vectors.shape == (len(reference), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    cosines = (vectors * reference).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= 0.9999, (golden["sentences"][worst][:60], float(cosines[worst]))


def test_float_questions_match_batches(golden: dict[str, Any]) -> None:
    embedder = LocalMiniLMEmbedder(precision="float32")
    sentences = golden["sentences"]
    batch = embedder.embed(sentences)
    for row, text in enumerate(sentences):
        assert float(batch[row] @ embedder.embed_one(text)) >= 0.9999


def test_int8_questions_stay_near_the_float_model(
    embedder: LocalMiniLMEmbedder, golden: dict[str, Any]
) -> None:
    # The default runs a lone question through the int8 graph and stores batches by the
    # float one; a question must still land where the float model puts it.
    assert embedder.precision == "int8"
    reference = np.asarray(golden["vectors"], dtype=np.float32)
    questions = np.stack([embedder.embed_one(text) for text in golden["sentences"]])
    np.testing.assert_allclose(np.linalg.norm(questions, axis=1), 1.0, rtol=1e-5)
    cosines = (questions * reference).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= 0.99, (golden["sentences"][worst][:60], float(cosines[worst]))
    assert float(cosines.max()) < 0.9999  # the int8 graph did run
    floats = embedder.embed(golden["sentences"])
    assert float((floats * reference).sum(axis=1).min()) >= 0.9999


def test_unknown_precision_is_refused() -> None:
    unknown: Any = "int4"
    with pytest.raises(ValueError, match="precision"):
        LocalMiniLMEmbedder(precision=unknown)


def test_similar_sentences_are_closer(embedder: LocalMiniLMEmbedder) -> None:
    query, near, far = embedder.embed(
        ["Which pet does Ann have?", "Ann adopted a beagle puppy.", "The stock market fell."]
    )
    assert float(query @ near) > float(query @ far) + 0.1


def test_span_vectors_come_from_the_same_pass(embedder: LocalMiniLMEmbedder) -> None:
    first = "I won a big video game tournament last week with my team."
    second = "My grandmother's apple pie recipe needs cinnamon and brown sugar."
    text = f"{first} {second}"
    spans = [[(0, len(first)), (len(first) + 1, len(text))], []]
    vectors, parts = embedder.embed_spans([text, second], spans)
    # The texts' own vectors are embed()'s, whatever spans are asked for.
    np.testing.assert_allclose(vectors, embedder.embed([text, second]), atol=1e-6)
    assert parts[0].shape == (2, 384) and parts[1].shape == (0, 384)
    np.testing.assert_allclose(np.linalg.norm(parts[0], axis=1), 1.0, rtol=1e-5)
    # Each span's vector sits nearer its own sentence than the other one does.
    alone = embedder.embed([first, second])
    cosines = parts[0] @ alone.T
    assert cosines[0, 0] > cosines[0, 1] and cosines[1, 1] > cosines[1, 0]
    # And nearer than the whole text's vector: the span says one thing, the text two.
    assert cosines[0, 0] > float(vectors[0] @ alone[0])
    assert cosines[1, 1] > float(vectors[0] @ alone[1])


def test_spans_past_the_token_limit_give_no_row(embedder: LocalMiniLMEmbedder) -> None:
    head = "short start. "
    text = head + "word " * 400 + "the end."
    _, parts = embedder.embed_spans([text], [[(0, len(head)), (len(text) - 8, len(text))]])
    assert parts[0].shape == (1, 384)
    with pytest.raises(ValueError, match="one list of spans per text"):
        embedder.embed_spans([text], [])
    empty, none = embedder.embed_spans([], [])
    assert empty.shape == (0, 384) and none == []


def test_shipped_files_and_notice() -> None:
    folder = minilm_model_dir()
    assert (folder / "model.onnx").stat().st_size < 60_000_000
    assert (folder / "model.int8.onnx").stat().st_size < 45_000_000
    notice = (folder / "NOTICE").read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in notice
    assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")


def test_runs_offline_without_torch_or_transformers(tmp_path: Path) -> None:
    # Blocks the heavy libraries and the network in a fresh interpreter; the embedder still works.
    code = (
        "import sys, socket\n"
        "for name in ('torch', 'transformers', 'sentence_transformers', 'huggingface_hub'):\n"
        "    sys.modules[name] = None\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from confide.embedders.local import LocalMiniLMEmbedder\n"
        "vector = LocalMiniLMEmbedder().embed_one('offline check')\n"
        "print(vector.shape[0], round(float(vector @ vector), 4))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["384", "1.0"]
    assert out.stderr == ""  # no progress bars or library chatter


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers"])
def test_missing_runtime_names_the_extra(module: str) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{module!r}] = None\n"
        "from confide.errors import MissingDependencyError\n"
        "from confide.embedders.local import LocalMiniLMEmbedder\n"
        "try:\n"
        "    LocalMiniLMEmbedder().embed_one('x')\n"
        "except MissingDependencyError as exc:\n"
        "    print(exc.package, exc.extra)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [module, "local"]


def test_a_runtime_failure_is_a_provider_error_that_quotes_no_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fresh = LocalMiniLMEmbedder()
    fresh.embed_one("loads both graphs")
    fresh.embed(["loads both graphs"])

    def refuse(self: object, texts: Any, spans: Any) -> Any:
        raise RuntimeError(f"cannot run on {texts}")

    monkeypatch.setattr(local_module._OnnxRunner, "run_spans", refuse)
    with pytest.raises(ProviderError) as one:
        fresh.embed_one("my secret")
    with pytest.raises(ProviderError) as batch:
        fresh.embed(["my secret"])
    for info in (one, batch):
        assert str(info.value) == "local embedder failed: RuntimeError"
