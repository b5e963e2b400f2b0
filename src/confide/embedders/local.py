"""The local MiniLM embedder: all-MiniLM-L6-v2 in ONNX Runtime, tokenised by ``tokenizers``.

The model ships inside Confide (``minilm/``: an ONNX graph, ``tokenizer.json``, NOTICE and
LICENSE), so nothing is downloaded and no hub is asked. The graph was made once from the
sentence-transformers weights by ``bench/minilm_export.py``; its large weights are stored as
float16 and cast to float32 when ONNX Runtime loads it, which keeps the file at 45 MB while
the arithmetic stays float32 (cosine >= 0.9999 against sentence-transformers, proven by
``tests/fixtures/minilm_golden.json``).

Beside it ships ``model.int8.onnx``, made from that graph by ``bench/minilm_int8.py``: every
matrix product but one quantised to int8 by ONNX Runtime (weights per channel, after smoothing
their inputs' outlier channels); the one feed-forward output product whose quantisation cost
the most accuracy stays float, and each layer's attention runs as one ``MultiHeadAttention``
node of ONNX Runtime instead of the export's plain operators (the same vectors, a tenth
faster: ``bench/minilm_attention.py``). It embeds a lone question two to three times as fast on a
two-core CPU and stays within cosine 0.99 of the float graph on the golden fixture, so
:meth:`embed_one` (the query path) runs it by default (``precision="int8"``,
``CONFIDE_EMBEDDER_PRECISION``; ``"float32"`` runs the float graph there too). Batches
(:meth:`embed`, what is stored) always run the float graph: ONNX Runtime quantises an
activation with one scale for the whole batch, so in a batch a short text would be quantised
at the scale of the longest one and of the padding (cosine down to 0.89 on the fixture).
Both graphs are the same model (``all-MiniLM-L6-v2``): a question embedded by one finds what
the other stored.

Why not the alternatives: sentence-transformers needs torch, and on the public PyPI torch
resolves to a CUDA build of several gigabytes; the PyPI packages that bundle this model either
depend on sentence-transformers or ship an int8 graph whose vectors differ from the reference.
ONNX Runtime is a single CPU wheel and runs the graph about as fast as anything here; the
HuggingFace ``tokenizers`` library reads the model's own ``tokenizer.json`` without torch or
transformers. Mean pooling and normalisation are a few NumPy lines.

Both libraries are imported lazily, on first use, never when :mod:`confide.retrieval` is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from confide.config import EmbedderPrecision as Precision
from confide.embedders.base import Vector, Vectors, l2_normalise
from confide.errors import MissingDependencyError, ProviderError

__all__ = [
    "MINILM_ID",
    "PRECISIONS",
    "LocalMiniLMEmbedder",
    "Precision",
    "Span",
    "minilm_model_dir",
]

MINILM_ID = "all-MiniLM-L6-v2"
_DIMS = 384
_MAX_TOKENS = 256  # max_seq_length in the model's sentence_bert_config.json
_TOKENIZER_FILE = "tokenizer.json"

PRECISIONS: dict[Precision, str] = {"int8": "model.int8.onnx", "float32": "model.onnx"}
"""The graph file of each precision."""

Span = tuple[int, int]
"""A ``(start, end)`` range of characters of a text, end exclusive."""


def minilm_model_dir() -> Path:
    """The folder of the MiniLM files shipped with Confide (both graphs, ``tokenizer.json``).

    Raises :class:`ProviderError` when a file is missing (a broken install).
    """
    folder = Path(__file__).resolve().parent / "minilm"
    for name in (*PRECISIONS.values(), _TOKENIZER_FILE):
        if not (folder / name).is_file():
            raise ProviderError(f"the packaged MiniLM model is incomplete: {name} is missing")
    return folder


class _OnnxRunner:
    """The transformer in ONNX Runtime, with mean pooling and normalisation."""

    def __init__(self, model_dir: Path, *, threads: int, precision: Precision) -> None:
        # Rust-side batch parallelism is not worth its threads for short texts, and once used
        # it makes tokenizers warn in every forked worker.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError(
                (exc.name or "onnxruntime").split(".")[0], "local"
            ) from None
        ort.set_default_logger_severity(3)  # errors only: no optimiser chatter on stderr
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model_dir / PRECISIONS[precision]), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        tokenizer = Tokenizer.from_file(str(model_dir / _TOKENIZER_FILE))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer = tokenizer

    def run_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]]
    ) -> tuple[Vectors, list[Vectors]]:
        """The vectors of ``texts`` and, from the same pass, one vector per character span.

        A span's vector pools the contextual token states that fall inside it (late
        chunking); a span whose tokens were all truncated away gives no row.
        """
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
        parts: list[Vectors] = []
        for row, (enc, wanted) in enumerate(zip(encodings, spans, strict=True)):
            rows = []
            for start, end in wanted:
                inside = [
                    i for i, (a, b) in enumerate(enc.offsets) if b > a and a >= start and b <= end
                ]
                if inside:
                    rows.append(hidden[row, inside].mean(axis=0))
            parts.append(l2_normalise(np.array(rows)) if rows else _no_rows())
        return l2_normalise(pooled), parts


@contextmanager
def _vendor_errors() -> Iterator[None]:
    """A runtime's or tokenizer's error while embedding, raised as :class:`ProviderError`
    (its class named, never its message: it may quote the text)."""
    try:
        yield
    except Exception as exc:  # a vendor error at the boundary
        raise ProviderError(f"local embedder failed: {type(exc).__name__}") from exc


def _no_rows() -> Vectors:
    return np.zeros((0, _DIMS), dtype=np.float32)


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 run locally (384 dimensions, L2-normalised, float32).

    Runs the model shipped with Confide in ONNX Runtime; needs the ``local`` extra
    (``onnxruntime``, ``tokenizers``) and raises :class:`MissingDependencyError` on first use
    without it. ``precision`` picks the graph (see the module docstring). ``threads`` is the
    intra-op thread count (one by default: two threads embed a lone question faster on an
    idle machine, but a query embeds while its lexical search runs on the other core, and
    there two threads were no faster; under load they were much slower). Loading is lazy
    and thread-safe; the first call pays for it. Errors while embedding are raised as
    :class:`ProviderError`.
    """

    def __init__(
        self, *, threads: int = 1, batch_size: int = 64, precision: Precision = "int8"
    ) -> None:
        """Configure the embedder; nothing is loaded until the first call."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, not {precision!r}")
        self.threads = threads
        self.batch_size = batch_size
        self.precision: Precision = precision
        self._runners: dict[Precision, _OnnxRunner] = {}
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """``all-MiniLM-L6-v2``."""
        return MINILM_ID

    @property
    def dims(self) -> int:
        """384."""
        return _DIMS

    @property
    def loaded(self) -> bool:
        """Whether both graphs it runs (batches' and questions') have been loaded."""
        return {"float32", self.precision} <= self._runners.keys()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts in length-sorted batches (less padding) by the float graph; order is
        preserved."""
        return self.embed_spans(texts, [()] * len(texts))[0]

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]]
    ) -> tuple[Vectors, list[Vectors]]:
        """The texts' vectors (length-sorted batches, order preserved) plus, for each text,
        one vector per ``(start, end)`` character span of it, pooled from the same forward
        pass (no second run of the model).

        :meth:`embed` is this without spans. A span's tokens are read in the
        context of the whole text, so a sentence keeps what its neighbours say about it;
        spans past the model's 256 tokens give no row.
        """
        if len(spans) != len(texts):
            raise ValueError("embed_spans needs one list of spans per text")
        if not texts:
            return _no_rows(), []
        runner = self._load("float32")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), _DIMS), dtype=np.float32)
        parts: list[Vectors] = [_no_rows()] * len(texts)
        with _vendor_errors():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                vectors, chunk_parts = runner.run_spans(
                    [texts[i] for i in chunk], [spans[i] for i in chunk]
                )
                out[chunk] = vectors
                for i, rows in zip(chunk, chunk_parts, strict=True):
                    parts[i] = rows
        return out, parts

    def embed_one(self, text: str) -> Vector:
        """Embed one text (a question) by the graph of :attr:`precision`."""
        runner = self._load(self.precision)
        with _vendor_errors():
            vectors, _ = runner.run_spans([text], [()])
        row: Vector = vectors[0]
        return row

    def _load(self, precision: Precision) -> _OnnxRunner:
        with self._lock:
            runner = self._runners.get(precision)
            if runner is None:
                model_dir = minilm_model_dir()
                try:
                    runner = _OnnxRunner(model_dir, threads=self.threads, precision=precision)
                except MissingDependencyError:
                    raise
                except Exception as exc:
                    raise ProviderError(
                        f"could not load the MiniLM model: {type(exc).__name__}"
                    ) from exc
                self._runners[precision] = runner
            return runner
