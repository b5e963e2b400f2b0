"""Make the int8 MiniLM graph Confide ships beside the float one (run once, by hand).

ONNX Runtime's dynamic quantisation (int8 weights per output channel, activations quantised
per tensor as each matrix product runs) embeds about twice as fast on a CPU, but applied as
is it moves MiniLM's vectors too far (cosine 0.967 to the float model on the golden
fixture): a few channels of each activation carry values a hundred times larger than the
rest, and one scale per tensor crushes the small ones. So, before quantising:

1. **Smoothing.** Each activation that feeds a quantised product is divided, channel by
   channel, by ``s = amax(x) ** alpha / amax(w) ** (1 - alpha)`` and the weight rows it meets
   are multiplied by ``s`` (exact in float arithmetic; one small ``Mul`` per activation).
   ``amax(x)`` is measured on calibration texts, ``alpha`` chosen on other texts.
2. **As few feed-forward output products stay float as the check allows.** Their input,
   after GELU, is the least quantisable; every product is quantised first, then, while the
   worst check cosine is under 0.99, the output product whose return to float raises it most
   goes back to float, one at a time. Every one kept int8 counts: with all six float the graph
   embedded a question about 1.5 times as fast as the float model, with one float about 2.7
   times (``bench/embed_latency.py --precision int8,float32``).
3. **Attention fused.** Each layer's self-attention, exported as plain operators, becomes
   one ``MultiHeadAttention`` node of ONNX Runtime (``_onnx_graph.fuse_attention``): the same
   vectors from about half the nodes, a question embedded about a tenth faster
   (``bench/minilm_attention.py``).

Calibration and the choice of ``alpha`` use LoCoMo dev conversation text (turns and
questions): ``--calibrate`` texts measure ``amax``, the next ``--check`` texts choose
``alpha`` (with every product int8) by the worst cosine to the float graph, then the output
products kept float. The golden fixture of
``tests/retrieval/test_local_embedder.py`` is not used here; the test checks the written graph
against it (cosine >= 0.99). Large float weights are stored as float16 behind a ``Cast``, as
in the float graph. The script refuses to write a graph whose worst check cosine is under 0.99.

    pip install onnx onnxruntime tokenizers numpy
    python bench/minilm_int8.py [--data FILE]   # writes minilm/model.int8.onnx
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from _locomo_data import DEFAULT_DATA, load_conversations
from _onnx_graph import embed, fuse_attention, halve_weights, single_text_feeds

MINILM = Path(__file__).resolve().parents[1] / "src/confide/embedders/minilm"
ALPHAS = (0.5, 0.6, 0.7, 0.75, 0.8)
SMALLEST_COSINE = 0.99


def float_graph(source: Path) -> onnx.ModelProto:
    """The shipped graph with its float16-stored weights folded back to float32."""
    model = onnx.load(str(source))
    graph = model.graph
    halves = {i.name: i for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT16}
    folded = []
    nodes = []
    for node in graph.node:
        if node.op_type == "Cast" and node.input[0] in halves:
            array = numpy_helper.to_array(halves[node.input[0]]).astype(np.float32)
            folded.append(numpy_helper.from_array(array, name=node.output[0]))
        else:
            nodes.append(node)
    kept = [i for i in graph.initializer if i.name not in halves]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + folded)
    return model


def weighted_products(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The MatMul nodes whose second input is a weight."""
    weights = {i.name for i in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def activation_peaks(
    model: onnx.ModelProto, tokenizer_file: Path, texts: list[str]
) -> dict[str, np.ndarray]:
    """Per channel, the largest magnitude each weighted product's input reaches on ``texts``."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    inputs = sorted({n.input[0] for n in weighted_products(model)})
    for name in inputs:
        probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    peaks: dict[str, np.ndarray] = {}
    for feeds in single_text_feeds(tokenizer_file, texts):
        for name, value in zip(names, session.run(None, feeds), strict=True):
            if name in inputs:
                peak = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
                peaks[name] = np.maximum(peaks[name], peak) if name in peaks else peak
    return peaks


def smoothed(model: onnx.ModelProto, peaks: dict[str, np.ndarray], alpha: float) -> onnx.ModelProto:
    """``model`` with each weighted product's input divided by its smoothing scale (a ``Mul``)
    and the weight rows multiplied by it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    weights = {i.name: i for i in graph.initializer}
    products = weighted_products(out)
    for name, peak in peaks.items():
        users = [n for n in products if n.input[0] == name]
        weight_peak = np.max(
            [np.abs(numpy_helper.to_array(weights[n.input[1]])).max(axis=1) for n in users], axis=0
        )
        scale = np.maximum(peak, 1e-5) ** alpha / np.maximum(weight_peak, 1e-5) ** (1 - alpha)
        scale = scale.astype(np.float32)
        for node in users:
            w = numpy_helper.to_array(weights[node.input[1]])
            weights[node.input[1]].CopyFrom(
                numpy_helper.from_array((w * scale[:, None]).astype(np.float32), node.input[1])
            )
            node.input[0] = f"{name}_smoothed"
        graph.initializer.append(numpy_helper.from_array(1.0 / scale, f"{name}_smoothing"))
        at = next(i for i, n in enumerate(graph.node) if name in n.output)
        graph.node.insert(
            at + 1,
            helper.make_node(
                "Mul", [name, f"{name}_smoothing"], [f"{name}_smoothed"], name=f"{name}_smooth"
            ),
        )
    return out


def feed_forward_outputs(model: onnx.ModelProto) -> list[str]:
    """The feed-forward output products (the weighted products with the widest input)."""
    weights = {i.name: i for i in model.graph.initializer}
    hidden = min(int(weights[n.input[1]].dims[0]) for n in weighted_products(model))
    return [n.name for n in weighted_products(model) if int(weights[n.input[1]].dims[0]) > hidden]


def quantised(model: onnx.ModelProto, folder: Path, keep_float: Sequence[str] = ()) -> Path:
    """Dynamic int8 quantisation of every weighted product but those in ``keep_float``."""
    source, target = folder / "smoothed.onnx", folder / "int8.onnx"
    onnx.save(model, str(source))
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=list(keep_float),
    )
    return target


def worst_cosine(
    graph: Path, tokenizer_file: Path, texts: list[str], reference: np.ndarray
) -> float:
    """The smallest cosine between ``graph``'s vectors of ``texts`` and ``reference``."""
    return float((embed(graph, tokenizer_file, texts) * reference).sum(axis=1).min())


def float_outputs(
    model: onnx.ModelProto,
    folder: Path,
    tokenizer_file: Path,
    texts: list[str],
    ref: np.ndarray,
    *,
    all_int8: float,
) -> tuple[list[str], float]:
    """The fewest feed-forward output products to keep float (chosen greedily) for a worst
    cosine of at least :data:`SMALLEST_COSINE` on ``texts``, and that worst cosine;
    ``all_int8`` is the worst cosine with every product int8."""
    kept: list[str] = []
    worst = all_int8
    candidates = feed_forward_outputs(model)
    while worst < SMALLEST_COSINE and len(kept) < len(candidates):
        tried = {
            name: worst_cosine(quantised(model, folder, [*kept, name]), tokenizer_file, texts, ref)
            for name in candidates
            if name not in kept
        }
        best = max(tried, key=lambda name: tried[name])
        kept.append(best)
        worst = tried[best]
        print(f"  {best} float too: worst {worst:.4f}")
    return kept, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format file")
    parser.add_argument("--calibrate", type=int, default=300)
    parser.add_argument("--check", type=int, default=400)
    parser.add_argument("--target", type=Path, default=MINILM / "model.int8.onnx")
    args = parser.parse_args()
    data = load_conversations(args.data)
    texts = [t.text for c in data.conversations for t in c.turns] + [q.text for q in data.questions]
    random.Random(0).shuffle(texts)
    calibration = texts[: args.calibrate]
    check = texts[args.calibrate : args.calibrate + args.check]
    tokenizer_file = MINILM / "tokenizer.json"
    base = float_graph(MINILM / "model.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        onnx.save(base, str(folder / "float.onnx"))
        reference = embed(folder / "float.onnx", tokenizer_file, check)
        peaks = activation_peaks(base, tokenizer_file, calibration)
        best: tuple[float, float] | None = None
        for alpha in ALPHAS:
            worst = worst_cosine(
                quantised(smoothed(base, peaks, alpha), folder), tokenizer_file, check, reference
            )
            print(f"alpha {alpha}: worst check cosine {worst:.4f} (every product int8)")
            if best is None or worst > best[1]:
                best = (alpha, worst)
        assert best is not None
        alpha = best[0]
        model = smoothed(base, peaks, alpha)
        keep_float, worst = float_outputs(
            model, folder, tokenizer_file, check, reference, all_int8=best[1]
        )
        if worst < SMALLEST_COSINE:
            raise SystemExit(f"no graph keeps cosine >= {SMALLEST_COSINE} (best {worst:.4f})")
        graph = quantised(model, folder, keep_float)
        count = halve_weights(graph, args.target, producer="confide bench/minilm_int8.py")
        written = onnx.load(str(args.target))
        fused = fuse_attention(written)
        if not fused:
            raise SystemExit("no attention of the export's pattern to fuse in the written graph")
        onnx.save(written, str(args.target))
        final = (embed(args.target, tokenizer_file, check) * reference).sum(axis=1)
        if final.min() < SMALLEST_COSINE:  # the float weights' float16 storage moved it
            args.target.unlink()
            raise SystemExit(f"the written graph's worst check cosine is {final.min():.4f}")
    kept = ", ".join(keep_float) or "none"
    print(
        f"alpha {alpha}; kept float: {kept}; {count} weights stored as float16; "
        f"attention fused in {fused} layers; "
        f"{args.target.stat().st_size / 1e6:.1f} MB; check cosine min {final.min():.4f} "
        f"mean {final.mean():.4f}; wrote {args.target}"
    )


if __name__ == "__main__":
    main()
