"""bench/_phases.py on a small embedded store: the query path's steps timed by thread, the
steps restored afterwards."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _phases import PHASES, query_phases
from confide.client import Confide
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.embedders.local import LocalMiniLMEmbedder
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.sqlite import SqliteStorage

KEK = bytes(range(32))


def _request(question: str) -> dict[str, Any]:
    return {"agent": "default", "account_id": "a", "user_id": "u", "query": question}


def test_phases_split_a_query_by_thread_and_leave_the_query_path_as_it_was(
    tmp_path: Path,
) -> None:
    storage = SqliteStorage(tmp_path / "confide.db", features=FEATURES)
    storage.migrate()
    settings = Settings(home=tmp_path / "home", encryption_key=KEK.hex())
    engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
    app = Confide(engine, embedder=LocalMiniLMEmbedder(), settings=settings)
    originals = [getattr(owner, attr) for owner, attr, _ in PHASES]
    try:
        app.engine.store_many(
            [
                {"account_id": "a", "user_id": "u", "key": "note", "value": value}
                for value in ("Maya adopted a puppy named Coco", "Liam ran a half marathon")
            ]
        )
        found = query_phases(app, ["Who adopted Coco?", "Where did Liam run?"], _request)
        embedder = app.memory_query.embedder
    finally:
        app.close()
    assert found["queries"] == 2
    phases = found["phases"]
    # The question is embedded and searched on the caller's thread; the lexical search runs
    # on a worker meanwhile.
    for name in ("caller: embedding", "caller: vector search", "worker: lexical search"):
        assert phases[name]["p50_ms"] > 0, name
    assert phases["caller: embedding"]["p50_ms"] < found["p50_ms"]
    # Each step's thread CPU time is reported beside its wall time; the embedding computes.
    assert all("cpu_p50_ms" in v for v in phases.values())
    assert phases["caller: embedding"]["cpu_p50_ms"] > 0
    assert "caller: embedding" in found["slowest_twentieth"]
    assert [getattr(owner, attr) for owner, attr, _ in PHASES] == originals
    assert isinstance(embedder, LocalMiniLMEmbedder)


def test_phases_count_the_garbage_collections_a_query_ran(tmp_path: Path) -> None:
    storage = SqliteStorage(tmp_path / "confide.db", features=FEATURES)
    storage.migrate()
    settings = Settings(home=tmp_path / "home", encryption_key=KEK.hex())
    engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings)
    app = Confide(engine, embedder=None, settings=settings)
    callbacks = list(gc.callbacks)

    def collecting(question: str) -> dict[str, Any]:
        gc.collect()  # within the query's clock: its request is built after the clock starts
        return _request(question)

    try:
        app.engine.store_many([{"account_id": "a", "user_id": "u", "key": "k", "value": "Coco"}])
        found = query_phases(app, ["Who is Coco?"], collecting)
    finally:
        app.close()
    assert found["phases"]["caller: gc (generation 2)"]["p50_ms"] > 0
    assert gc.callbacks == callbacks
