"""mem0's side of the LoCoMo harness: Confide's embedder behind mem0's embedder interface."""

from __future__ import annotations

import importlib.util
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _locomo_data import Turn
from _mem0_side import ConfideEmbedding, make_mem0_side
from confide.testing.embedders import HashingEmbedder


def test_the_adapter_hands_mem0_confide_vectors_as_float_lists() -> None:
    embedder = HashingEmbedder(dims=8)
    adapter = ConfideEmbedding(embedder, config=None)
    texts = ["Ann adopted a puppy", "Bob works in Boston"]
    one = adapter.embed(texts[0], "add")
    query = adapter.embed(texts[1], "search")
    batch = adapter.embed_batch(texts)
    assert all(type(x) is float for x in one + query + batch[0])
    np.testing.assert_allclose(one, embedder.embed([texts[0]])[0], rtol=1e-6)
    np.testing.assert_allclose(query, embedder.embed_one(texts[1]), rtol=1e-6)
    np.testing.assert_allclose(batch, embedder.embed(texts), rtol=1e-6)


def _turns(conv_id: str, texts: list[str]) -> list[Turn]:
    when = datetime(2023, 5, 1, 14, 0)
    return [
        Turn(conv_id, f"D1:{i + 1}", 1, i, "Ann", text, None, when, "1:00 pm on 1 May, 2023")
        for i, text in enumerate(texts)
    ]


@pytest.mark.slow
def test_mem0_ranks_with_confides_minilm_per_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not importorskip: mem0 reads its telemetry switch when first imported, which is
    # make_mem0_side's job (it refuses a mem0 imported with telemetry on).
    if importlib.util.find_spec("mem0") is None:
        pytest.skip("the bench extra (mem0ai) is not installed")
    from confide.embedders.local import LocalMiniLMEmbedder

    # make_mem0_side sets these for mem0's import; monkeypatch puts the old values back.
    for name in ("MEM0_TELEMETRY", "MEM0_DIR", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "unset-by-test")
    embedder = LocalMiniLMEmbedder()
    side = make_mem0_side(embedder)
    assert side is not None
    workdir = Path(side.memory.config.history_db_path).parent
    try:
        assert "all-MiniLM-L6-v2 (Confide's, in process)" in side.setup
        side.ingest(
            "c1",
            _turns(
                "c1",
                [
                    "We went hiking in the Alps in July.",
                    "I adopted a puppy named Rex last week.",
                    "My sister works as a nurse in Boston.",
                ],
            ),
        )
        side.ingest("c2", _turns("c2", ["My new dog is called Bruno."]))
        assert side.query("c1", "What is the name of Ann's dog?", 3)[0] == "D1:2"
        assert side.query("c1", "Where does her sister work?", 3)[0] == "D1:3"
        assert side.query("c2", "What is the name of the dog?", 3) == ["D1:1"]
        assert side.query("c3", "What is the name of the dog?", 3) == []
    finally:
        side.close()
    assert not workdir.exists()
