"""Would a fused attention make the shipped MiniLM graphs embed a question faster?

The exported graphs spell each layer's self-attention out in plain operators: the heads split
and joined again by ``Reshape`` and ``Transpose``, the target shapes computed at run time by
``Shape``, ``Gather``, ``Unsqueeze`` and ``Concat``, the padding mask built anew in each
layer. ONNX Runtime's CPU provider has one kernel for all of it (``com.microsoft``
``MultiHeadAttention``), and its transformer optimiser, which would swap it in, does not
recognise this export's pattern. So this script rewrites each layer by hand: the query, key
and value projections (after their bias) go into one ``MultiHeadAttention`` node with the
padding mask as ``key_padding_mask``; what then computes nothing the output needs is dropped
(about half of each graph's nodes).

It writes the rewritten graphs to a temporary folder, checks that they embed as the shipped
ones do (each LoCoMo dev question of ``--data`` alone, 50 generated ones and one padded batch:
the largest difference of a vector component is printed), then times both one question at a
time, one intra-op thread as ``embed_one`` runs them, alternating question by question:

    pip install onnx   # besides the `local` extra
    python bench/minilm_attention.py [--precision int8,float32] [--rounds 3] [--queries 300]
                                     [--data FILE]

The int8 graph, which embeds the question, ships fused: ``minilm_int8.py`` fuses it as its
last step, and ``--precision int8 --write`` rewrote the graph that script had written before,
in place, once the check found its vectors unchanged (nothing is written unless they are).
The float graph, which embeds what is stored, is left as exported. A graph already fused has
nothing left to compare.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from tokenizers import Tokenizer

from _locomo_data import DEFAULT_DATA, load_conversations
from _onnx_graph import fuse_attention
from confide.embedders.local import PRECISIONS, Precision, minilm_model_dir
from embed_latency import queries


def _session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _feeds(tokenizer: Tokenizer, texts: list[str]) -> dict[str, np.ndarray]:
    encodings = tokenizer.encode_batch(texts)
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(texts), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def _vectors(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> np.ndarray:
    hidden = session.run(None, feeds)[0]
    weights = feeds["attention_mask"][..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    result: np.ndarray = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return result


def compare(
    precision: Precision,
    folder: Path,
    *,
    rounds: int,
    count: int,
    checked: list[str],
    write: bool = False,
) -> None:
    """Rewrite the shipped graph of ``precision``, check it, time both; print the figures.

    With ``write``, the rewritten graph then replaces the shipped one if it embedded every
    text of the check exactly as the shipped graph did.
    """
    model_dir = minilm_model_dir()
    shipped_path = model_dir / PRECISIONS[precision]
    model = onnx.load(str(shipped_path))
    before = len(model.graph.node)
    layers = fuse_attention(model)
    if not layers:
        print(f"{precision}: no attention of the export's pattern found; nothing to compare")
        return
    # Beside the shipped graph when it may replace it (a rename within one file system).
    fused_path = (shipped_path.parent if write else folder) / f"fused-{precision}.onnx"
    onnx.save(model, str(fused_path))
    print(f"{precision}: {layers} layers fused, nodes {before} -> {len(model.graph.node)}")
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    shipped, fused = _session(shipped_path), _session(fused_path)
    asked = queries(count, seed=0)
    alone = [*checked, *asked[:50]]
    single = max(
        float(np.abs(_vectors(shipped, f) - _vectors(fused, f)).max())
        for f in (_feeds(tokenizer, [text]) for text in alone)
    )
    batch = _feeds(tokenizer, [text[: 10 + 7 * i] for i, text in enumerate(asked[:16])])
    padded = float(np.abs(_vectors(shipped, batch) - _vectors(fused, batch)).max())
    print(
        f"  largest difference of a component: {len(alone)} questions alone {single:.2e}, "
        f"a padded batch of 16 {padded:.2e}"
    )
    if write:
        if single or padded:
            fused_path.unlink()
            raise SystemExit(f"{precision}: the fused graph embeds differently; not written")
        fused_path.replace(shipped_path)
        print(f"  wrote {shipped_path}")
        return
    for round_ in range(rounds):
        times: dict[str, list[float]] = {"shipped": [], "fused": []}
        arms = [("shipped", shipped), ("fused", fused)]
        for i, text in enumerate(queries(count, seed=round_ + 1)):
            feeds = _feeds(tokenizer, [text])
            for name, session in arms if i % 2 == 0 else arms[::-1]:
                start = time.perf_counter()
                session.run(None, feeds)
                times[name].append((time.perf_counter() - start) * 1000)
        a, b = (statistics.median(times[name]) for name in ("shipped", "fused"))
        print(f"  round {round_}: p50 shipped {a:.2f} ms, fused {b:.2f} ms ({b / a:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="int8,float32", help="comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-format file")
    parser.add_argument(
        "--write",
        action="store_true",
        help="replace the shipped int8 graph by the fused one (with --precision int8 only)",
    )
    args = parser.parse_args()
    asked_for = args.precision.split(",")
    if args.write and asked_for != ["int8"]:
        parser.error("--write rewrites the int8 graph only: give --precision int8")
    if unknown := set(asked_for) - set(PRECISIONS):
        parser.error(f"--precision: {sorted(unknown)} not among {sorted(PRECISIONS)}")
    ort.set_default_logger_severity(3)
    checked = [q.text for q in load_conversations(args.data).questions]
    with tempfile.TemporaryDirectory() as folder:
        for precision in PRECISIONS:
            if precision in asked_for:
                compare(
                    precision,
                    Path(folder),
                    rounds=args.rounds,
                    count=args.queries,
                    checked=checked,
                    write=args.write,
                )


if __name__ == "__main__":
    main()
