"""mem0 on the same turns: ``infer=False``, Confide's own embedder, embedded Qdrant.

mem0 gets the very embedder object Confide's side uses (the shipped ONNX MiniLM of
``confide.embedders.local``, through the harness's caches), so the two systems rank the same
vectors and torch is never needed. mem0 is built with its ``openai`` embedder, which loads
no model, and that embedder is then replaced by :class:`ConfideEmbedding`, which speaks
mem0's embedder interface (``mem0.embeddings.base.EmbeddingBase``).

Nothing leaves the machine: telemetry is off before mem0 is imported, mem0's home folder is
a temporary one, and the OpenAI clients mem0 builds (the embedder replaced, the LLM never
called with ``infer=False``) point at a closed loopback port, so a call that slipped through
would fail here instead of reaching a service.

Returns ``None`` from :func:`make_mem0_side` when ``mem0ai`` is not installed (the
``bench`` extra).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from _locomo_data import Turn
from _prototype import memory_text
from confide.embedders import Embedder

# The discard port on loopback: nothing listens, so a stray call fails at once.
_NOWHERE = "http://127.0.0.1:9/v1"
_UNUSED_KEY = "unused-infer-false"


class ConfideEmbedding:
    """mem0's embedder interface over an Confide :class:`~confide.embedders.Embedder`.

    mem0 calls ``embed(text, memory_action)`` for one text, ``embed_batch(texts,
    memory_action)`` for several, and reads ``config.embedding_dims``; vectors go back as
    lists of floats. Questions (``memory_action="search"``) go through ``embed_one``, as
    Confide's queries do; stored texts through ``embed``, as Confide's ingestion does.
    """

    def __init__(self, embedder: Embedder, config: Any) -> None:
        self.embedder = embedder
        self.config = config

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        """One vector for ``text``."""
        if memory_action == "search":
            return [float(x) for x in self.embedder.embed_one(text)]
        return [float(x) for x in self.embedder.embed([text])[0]]

    def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
        """One vector per text, in one batch."""
        return [[float(x) for x in row] for row in self.embedder.embed(list(texts))]


class Mem0Side:
    """Ingest and query through ``mem0.Memory``."""

    def __init__(self, memory: Any, workdir: tempfile.TemporaryDirectory[str], setup: str) -> None:
        self.memory = memory
        self.setup = setup
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

    def close(self) -> None:
        """Close mem0's history database and Qdrant folder, then remove them."""
        self.memory.close()
        self.memory.vector_store.client.close()
        self._workdir.cleanup()


def _signals() -> str:
    # mem0 adds keyword (BM25) scores only with fastembed and entity boosts only with spaCy,
    # both optional extras of mem0ai that fetch a model on first use; say which are present.
    present = [name for name in ("fastembed", "spacy") if importlib.util.find_spec(name)]
    if not present:
        return "dense only (fastembed and spaCy not installed)"
    return f"with {', '.join(present)} installed"


def make_mem0_side(embedder: Embedder) -> Mem0Side | None:
    """Build mem0 over ``embedder`` and an embedded Qdrant folder, or ``None`` without mem0."""
    if importlib.util.find_spec("mem0") is None:
        return None
    workdir = tempfile.TemporaryDirectory(prefix="confide-bench-mem0-")
    # Read by mem0 when it is imported: no telemetry, its config file in the temporary folder,
    # and no model hub for mem0's optional extras if they happen to be installed.
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = workdir.name
    os.environ["HF_HUB_OFFLINE"] = "1"
    from mem0 import Memory
    from mem0.memory import telemetry

    if telemetry.MEM0_TELEMETRY:
        raise RuntimeError("mem0 was imported with telemetry on before the benchmark built it")
    config = {
        "embedder": {
            "provider": "openai",
            "config": {
                "model": embedder.model_id,
                "embedding_dims": embedder.dims,
                "api_key": _UNUSED_KEY,
                "openai_base_url": _NOWHERE,
            },
        },
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "locomo",
                "path": os.path.join(workdir.name, "qdrant"),
                "embedding_model_dims": embedder.dims,
                "on_disk": False,
            },
        },
        "llm": {
            "provider": "openai",
            "config": {"api_key": _UNUSED_KEY, "openai_base_url": _NOWHERE},
        },
        "history_db_path": os.path.join(workdir.name, "history.db"),
    }
    memory = Memory.from_config(config)
    memory.embedding_model = ConfideEmbedding(embedder, memory.embedding_model.config)
    setup = (
        f"mem0ai {version('mem0ai')}, infer=False, embedded Qdrant, "
        f"embedder {embedder.model_id} (Confide's, in process), {_signals()}"
    )
    return Mem0Side(memory, workdir, setup)
