"""mem0 on the same turns: ``infer=False``, the same local MiniLM, embedded Qdrant.

Returns ``None`` from :func:`make_mem0_side` when ``mem0ai`` is not installed (the
``bench`` extra). No LLM is called: with ``infer=False`` mem0 stores each message as is;
a placeholder API key only satisfies its constructor.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from _locomo_data import Turn
from _prototype import memory_text
from engram.embedders.local import minilm_model_dir


class Mem0Side:
    """Ingest and query through ``mem0.Memory``."""

    def __init__(self, memory: Any, workdir: tempfile.TemporaryDirectory[str]) -> None:
        self.memory = memory
        self._workdir = workdir

    def ingest(self, conv_id: str, turns: Sequence[Turn]) -> None:
        """One ``add`` per turn, as mem0's own LoCoMo harness does."""
        for turn in turns:
            self.memory.add(
                [{"role": "user", "content": memory_text(turn), "name": turn.speaker}],
                user_id=conv_id,
                metadata={"dia_id": turn.dia_id},
                infer=False,
            )

    def query(self, conv_id: str, question: str, k: int) -> list[str]:
        """Dialogue ids of mem0's top ``k`` results."""
        found = self.memory.search(question, top_k=k, filters={"user_id": conv_id}, threshold=0.0)
        rows = found.get("results", found) if isinstance(found, dict) else found
        return [str((r.get("metadata") or {}).get("dia_id", "")) for r in rows]


def make_mem0_side() -> Mem0Side | None:
    """Build mem0 with local MiniLM and an embedded Qdrant folder, or ``None``."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from mem0 import Memory
    except ImportError:
        return None
    workdir = tempfile.TemporaryDirectory(prefix="engram-bench-mem0-")
    os.environ.setdefault("MEM0_DIR", workdir.name)
    config = {
        "embedder": {
            "provider": "huggingface",
            "config": {"model": str(minilm_model_dir()), "embedding_dims": 384},
        },
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "locomo",
                "path": os.path.join(workdir.name, "qdrant"),
                "embedding_model_dims": 384,
                "on_disk": False,
            },
        },
        "llm": {"provider": "openai", "config": {"api_key": "unused-infer-false"}},
        "history_db_path": os.path.join(workdir.name, "history.db"),
    }
    return Mem0Side(Memory.from_config(config), workdir)
