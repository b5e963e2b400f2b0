"""ConfideCheckpointSaver beyond the conformance suite: a real graph (sync and async), sealed
blobs, owners, retention and the latest-state row across a restart, on both backends."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.langgraph import ConfideCheckpointSaver
from confide.storage.base import Storage

SECRET = "the launch code is 0451"


class State(TypedDict):
    notes: Annotated[list[str], operator.add]


def _graph(saver: ConfideCheckpointSaver) -> Any:
    builder = StateGraph(State)

    def remember(state: State) -> dict[str, list[str]]:
        return {"notes": [f"seen {len(state['notes'])}"]}

    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(checkpointer=saver)


def _config(thread: str, user: str = "ann") -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def test_a_graph_resumes_its_thread_from_the_saver(engine: MemoryEngine) -> None:
    graph = _graph(ConfideCheckpointSaver(engine, account_id="acme"))
    graph.invoke({"notes": [SECRET]}, _config("t1"))
    state = graph.invoke({"notes": ["again"]}, _config("t1"))
    assert state["notes"] == [SECRET, "seen 1", "again", "seen 3"]
    # A fresh saver (another process, say) sees the same thread.
    again = _graph(ConfideCheckpointSaver(engine, account_id="acme"))
    assert again.get_state(_config("t1")).values["notes"][-1] == "seen 3"
    assert len(list(again.get_state_history(_config("t1")))) >= 4


@pytest.mark.asyncio
async def test_a_graph_runs_with_the_async_methods(engine: MemoryEngine) -> None:
    graph = _graph(ConfideCheckpointSaver(engine, account_id="acme"))
    await graph.ainvoke({"notes": ["a"]}, _config("t2"))
    state = await graph.ainvoke({"notes": ["b"]}, _config("t2"))
    assert state["notes"] == ["a", "seen 1", "b", "seen 3"]
    snapshot = await graph.aget_state(_config("t2"))
    assert snapshot.values["notes"] == state["notes"]


def test_blobs_are_sealed_at_rest(engine: MemoryEngine, storage: Storage) -> None:
    graph = _graph(ConfideCheckpointSaver(engine, account_id="acme"))
    graph.invoke({"notes": [SECRET]}, _config("t3"))
    with storage.reader_across_accounts() as db:  # type: ignore[attr-defined]
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            rows = db.run(f"SELECT ciphertext FROM {table}").fetchall()
            assert rows, table
            assert all(b"0451" not in bytes(r[0]) for r in rows), table


def test_another_owner_reads_nothing_and_an_owner_is_required(engine: MemoryEngine) -> None:
    saver = ConfideCheckpointSaver(engine, account_id="acme")
    _graph(saver).invoke({"notes": ["x"]}, _config("t4", "ann"))
    assert saver.get_tuple(_config("t4", "ann")) is not None
    assert saver.get_tuple(_config("t4", "bob")) is None
    assert list(saver.list(_config("t4", "bob"))) == []
    with pytest.raises(ValidationError, match="owner"):
        _graph(saver).invoke({"notes": ["x"]}, {"configurable": {"thread_id": "t5"}})
    with pytest.raises(ValidationError, match="keep_last"):
        ConfideCheckpointSaver(engine, account_id="acme", keep_last=0)


def test_retention_keeps_the_newest_n_per_thread(engine: MemoryEngine, storage: Storage) -> None:
    saver = ConfideCheckpointSaver(engine, account_id="acme", keep_last=2)
    graph = _graph(saver)
    # LangGraph saves a step's writes in the background: some land after the next
    # checkpoint's prune, and the saver drops those (their checkpoint is gone).
    for n in range(4):
        graph.invoke({"notes": [f"turn {n}"]}, _config("t6"))
    graph.invoke({"notes": ["other"]}, _config("t7"))
    history = list(saver.list(_config("t6")))
    assert len(history) == 2
    assert history[0].checkpoint["channel_values"]["notes"][-1] == "seen 7"
    assert len(list(saver.list(_config("t7")))) == 2  # its own two, untouched by t6's prune
    with storage.reader_across_accounts() as db:  # type: ignore[attr-defined]
        kept = {
            r[0]
            for r in db.run(
                "SELECT checkpoint_id FROM checkpoint_writes WHERE thread_id = ?", ["t6"]
            ).fetchall()
        }
    assert kept <= {t.config["configurable"]["checkpoint_id"] for t in history}
    # The state still resumes after pruning.
    assert graph.invoke({"notes": ["last"]}, _config("t6"))["notes"][-1] == "seen 9"


def test_latest_state_row_per_user_and_thread_survives_a_restart(
    tmp_path: Path, storage_url: str, key_store_url: str
) -> None:
    settings = Settings(
        home=tmp_path / "home",
        encryption_key=bytes(range(32)).hex(),
        storage_url=storage_url,
        keystore_url=key_store_url,
        embedder="none",
    )
    first = MemoryEngine.open(settings)
    graph = _graph(ConfideCheckpointSaver(first, account_id="acme"))
    graph.invoke({"notes": ["one"]}, _config("t8", "ann"))
    graph.invoke({"notes": ["two"]}, _config("t8", "ann"))
    graph.invoke({"notes": ["hers"]}, _config("t9", "cat"))
    first.close()
    second = MemoryEngine.open(settings)
    try:
        saver = ConfideCheckpointSaver(second, account_id="acme")
        latest = saver.latest("ann", "t8")
        assert latest is not None
        assert latest.checkpoint["channel_values"]["notes"] == ["one", "seen 1", "two", "seen 3"]
        newest = saver.get_tuple(_config("t8", "ann"))
        assert newest is not None and newest.config == latest.config
        assert saver.latest("cat", "t8") is None and saver.latest("ann", "t9") is None
        with second.storage.reader_across_accounts() as db:  # type: ignore[attr-defined]
            rows = db.run(
                "SELECT user_id, thread_id FROM supervisor_checkpoints ORDER BY thread_id"
            ).fetchall()
        assert [tuple(r) for r in rows] == [("ann", "t8"), ("cat", "t9")]
        saver.delete_thread("t8")
        assert saver.latest("ann", "t8") is None
    finally:
        second.close()


def test_erasing_the_owner_deletes_their_graph_state(
    engine: MemoryEngine, storage: Storage
) -> None:
    saver = ConfideCheckpointSaver(engine, account_id="acme")
    _graph(saver).invoke({"notes": [SECRET]}, _config("t10", "ann"))
    _graph(saver).invoke({"notes": ["kept"]}, _config("t11", "bob"))
    tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "supervisor_checkpoints")
    assert all(storage.count_rows(t, "acme", "ann") > 0 for t in tables)
    receipt = engine.erase_user(account_id="acme", user_id="ann")
    assert all(receipt.deleted[t] > 0 for t in tables)
    assert all(storage.count_rows(t, "acme", "ann") == 0 for t in tables)
    assert saver.get_tuple(_config("t10", "ann")) is None
    assert saver.get_tuple(_config("t11", "bob")) is not None
