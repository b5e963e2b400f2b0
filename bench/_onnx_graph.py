"""ONNX graph helpers shared by the two one-off scripts that made the shipped MiniLM graphs.

``minilm_export.py`` (the float graph, from the sentence-transformers weights) and
``minilm_int8.py`` (the int8 graph, from the float one) both store large float weights as
float16 behind a ``Cast`` and check their output by embedding texts one at a time here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from tokenizers import Tokenizer

MIN_ELEMENTS = 1024  # smaller tensors (biases, layer norms) stay float32


def halve_weights(source: Path, target: Path, *, producer: str) -> int:
    """Store large float32 initializers of ``source`` as float16 plus a Cast node in
    ``target``; return how many. ``producer`` is written into the graph."""
    model = onnx.load(str(source))
    graph = model.graph
    casts = []
    kept = []
    for init in graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype != np.float32 or array.size < MIN_ELEMENTS:
            kept.append(init)
            continue
        half = numpy_helper.from_array(array.astype(np.float16), name=f"{init.name}_fp16")
        kept.append(half)
        casts.append(
            helper.make_node(
                "Cast",
                [half.name],
                [init.name],
                to=onnx.TensorProto.FLOAT,
                name=f"{init.name}_cast",
            )
        )
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    model.producer_name = producer
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return len(casts)


def single_text_feeds(tokenizer_file: Path, texts: list[str]) -> Iterator[dict[str, np.ndarray]]:
    """The graph's inputs for each text alone (no padding; truncated at 256 tokens)."""
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    for text in texts:
        enc = tokenizer.encode(text)
        ids = np.array([enc.ids], dtype=np.int64)
        yield {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
        }


def embed(graph: Path, tokenizer_file: Path, texts: list[str]) -> np.ndarray:
    """Mean-pooled, normalised vectors of ``texts`` by ``graph``, one text at a time."""
    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    rows = []
    for feeds in single_text_feeds(tokenizer_file, texts):
        hidden = session.run(None, feeds)[0][0]
        pooled = hidden.mean(axis=0)
        rows.append(pooled / np.linalg.norm(pooled))
    return np.vstack(rows)
