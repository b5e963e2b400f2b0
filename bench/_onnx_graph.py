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
from onnxruntime.transformers.onnx_model import OnnxModel
from tokenizers import Tokenizer

MIN_ELEMENTS = 1024  # smaller tensors (biases, layer norms) stay float32
HEADS = 12
"""MiniLM-L6's attention heads (384 dimensions, 32 a head)."""
_MASK = "attention_mask_int32"
_MASK_FILTER = -10000.0
"""What ``MultiHeadAttention`` adds to a padded key's score (its default, written out). The
export adds the float minimum instead; either makes the padded keys' weights exactly 0."""


def _layer(index: int) -> str:
    return f"/inner/encoder/layer.{index}/attention/self/"


def fuse_attention(model: onnx.ModelProto) -> int:
    """Rewrite each layer's attention in ``model`` as one ``MultiHeadAttention``; return how
    many layers were rewritten (0: the graph does not have the export's pattern)."""
    graph = model.graph
    produced = {out: node for node in graph.node for out in node.output}
    fused: list[onnx.NodeProto] = []
    replaced: set[int] = set()
    while True:
        prefix = _layer(len(fused))
        joined = produced.get(prefix + "Reshape_3_output_0")  # the heads joined again
        projections = [prefix + f"{name}/Add_output_0" for name in ("query", "key", "value")]
        if joined is None or joined.op_type != "Reshape":
            break
        if not all(p in produced for p in projections):
            break
        if prefix + "Softmax_output_0" not in produced:
            raise ValueError(f"{prefix}: no Softmax between the projections and the join")
        replaced.add(id(joined))
        fused.append(
            helper.make_node(
                "MultiHeadAttention",
                [*projections, "", _MASK],
                list(joined.output),
                domain="com.microsoft",
                num_heads=HEADS,
                mask_filter_value=_MASK_FILTER,
                name=prefix + "MultiHeadAttention",
            )
        )
    if not fused:
        return 0
    mask = helper.make_node(
        "Cast", ["attention_mask"], [_MASK], to=onnx.TensorProto.INT32, name=_MASK
    )
    nodes = [n for n in graph.node if id(n) not in replaced] + [mask, *fused]
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(op.domain == "com.microsoft" for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    # What computed only the old attention (the heads' shapes, the per-layer mask) goes, with
    # its weights; the fused nodes go where their inputs exist.
    pruned = OnnxModel(model)
    pruned.prune_graph(allow_remove_graph_inputs=False)
    pruned.topological_sort(is_deterministic=True)
    # The shapes recorded for tensors no node makes any more would only mislead a reader.
    made = {name for node in graph.node for name in (*node.input, *node.output)}
    shapes = [info for info in graph.value_info if info.name in made]
    del graph.value_info[:]
    graph.value_info.extend(shapes)
    return len(fused)


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
