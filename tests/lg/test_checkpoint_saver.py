"""ConfideCheckpointSaver beyond the conformance suite: a real graph (sync and async), sealed
blobs, owners, retention and the latest-state row across a restart, on both backends."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict, cast

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import PermissionDeniedError, ValidationError
from confide.gate import Principal, Scope
from confide.langgraph import ConfideCheckpointSaver
from confide.storage.base import Storage
from confide.storage.checkpoints import checkpoint_ddl
from confide.storage.schema import account_policy
from confide.testing.conformance.harness import latest_versions, unrecord_steps

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


def test_two_users_of_an_account_keep_their_own_thread(engine: MemoryEngine) -> None:
    saver = ConfideCheckpointSaver(engine, account_id="acme")
    graph = _graph(saver)
    graph.invoke({"notes": ["ann's"]}, _config("shared", "ann"))
    graph.invoke({"notes": ["bob's"]}, _config("shared", "bob"))
    assert graph.get_state(_config("shared", "ann")).values["notes"] == ["ann's", "seen 1"]
    assert graph.get_state(_config("shared", "bob")).values["notes"] == ["bob's", "seen 1"]
    # Each resumes their own thread; neither write reaches the other's state.
    again = graph.invoke({"notes": ["more"]}, _config("shared", "ann"))
    assert again["notes"] == ["ann's", "seen 1", "more", "seen 3"]
    assert graph.get_state(_config("shared", "bob")).values["notes"] == ["bob's", "seen 1"]
    assert len(list(saver.list(_config("shared", "bob")))) == 3  # input, two steps
    assert len(list(saver.list(_config("shared", "ann")))) == 6
    latest = saver.latest("bob", "shared")
    assert latest is not None and latest.checkpoint["channel_values"]["notes"][0] == "bob's"
    # A saver owned by one user deletes that user's thread only.
    ConfideCheckpointSaver(engine, account_id="acme", user_id="bob").delete_thread("shared")
    assert saver.get_tuple(_config("shared", "bob")) is None
    assert graph.get_state(_config("shared", "ann")).values["notes"][-1] == "seen 3"


def test_a_saver_configured_with_an_agent_keeps_that_agents_threads(
    engine: MemoryEngine,
) -> None:
    planner = _graph(ConfideCheckpointSaver(engine, account_id="acme", agent="planner"))
    writer = _graph(ConfideCheckpointSaver(engine, account_id="acme", agent="writer"))
    planner.invoke({"notes": ["plan"]}, _config("t12"))
    writer.invoke({"notes": ["draft"]}, _config("t12"))
    assert planner.get_state(_config("t12")).values["notes"] == ["plan", "seen 1"]
    assert writer.get_state(_config("t12")).values["notes"] == ["draft", "seen 1"]


def test_the_saver_applies_its_principal(engine: MemoryEngine) -> None:
    pinned = ConfideCheckpointSaver(engine, principal=Principal(account_id="acme", user_id="ann"))
    graph = _graph(pinned)
    # The pinned user is the owner of a config naming none.
    graph.invoke({"notes": ["x"]}, {"configurable": {"thread_id": "t13"}})
    assert graph.get_state(_config("t13", "ann")).values["notes"] == ["x", "seen 1"]
    with pytest.raises(PermissionDeniedError):
        graph.invoke({"notes": ["y"]}, _config("t13", "bob"))
    with pytest.raises(PermissionDeniedError):
        pinned.get_tuple(_config("t13", "bob"))
    reader = ConfideCheckpointSaver(
        engine, principal=Principal(account_id="acme", scope=Scope.READ)
    )
    assert reader.get_tuple(_config("t13", "ann")) is not None
    with pytest.raises(PermissionDeniedError):
        _graph(reader).invoke({"notes": ["z"]}, _config("t13", "ann"))
    with pytest.raises(PermissionDeniedError):
        reader.delete_thread("t13")
    with pytest.raises(PermissionDeniedError):
        ConfideCheckpointSaver(engine, account_id="acme").put(
            _config("t14", "app:concierge"),
            empty_checkpoint(),
            {},
            {},
        )
    bound = Principal(account_id="acme", agents=("planner",))
    with pytest.raises(PermissionDeniedError):
        ConfideCheckpointSaver(engine, principal=bound, agent="writer")
    assert graph.get_state(_config("t13", "ann")).values["notes"] == ["x", "seen 1"]


_OLD_COLUMNS = {
    "checkpoints": "account_id, user_id, thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, channel_versions, created_at, key_id, ciphertext, wrapped_key",
    "checkpoint_blobs": "account_id, thread_id, checkpoint_ns, channel, version, user_id, "
    "key_id, ciphertext, wrapped_key",
    "checkpoint_writes": "account_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
    "user_id, channel, task_path, key_id, ciphertext, wrapped_key",
    "supervisor_checkpoints": "account_id, user_id, thread_id, checkpoint_id, updated_at",
}


def test_checkpoints_of_an_older_store_keep_their_owners_after_upgrade(
    engine: MemoryEngine, storage: Storage
) -> None:
    saver = ConfideCheckpointSaver(engine, account_id="acme")
    graph = _graph(saver)
    graph.invoke({"notes": ["ann's"]}, _config("t15", "ann"))
    graph.invoke({"notes": ["bob's"]}, _config("t16", "bob"))
    # As a store made before version 21 left it: the tables keyed without the owner.
    sql = cast(Any, storage)
    with sql.transaction() as tx:
        tx.across_accounts()
        kept = {t: tx.run(f"SELECT {c} FROM {t}").fetchall() for t, c in _OLD_COLUMNS.items()}
        for table in _OLD_COLUMNS:
            tx.run(f"DROP TABLE {table}")
        blob, real = (
            ("BYTEA", "DOUBLE PRECISION") if storage.name == "postgres" else ("BLOB", "REAL")
        )
        for statement in checkpoint_ddl(blob, real):
            tx.run(statement)
        if storage.name == "postgres":
            for table in _OLD_COLUMNS:
                for statement in account_policy(table):
                    tx.run(statement)
        for table, rows in kept.items():
            marks = ", ".join("?" for _ in _OLD_COLUMNS[table].split(", "))
            for row in rows:
                tx.run(f"INSERT INTO {table} ({_OLD_COLUMNS[table]}) VALUES ({marks})", list(row))
    unrecord_steps(storage, "checkpoints", version=3)
    for _ in range(2):  # and once more after its record was lost
        storage.migrate()
        assert storage.schema_versions() == latest_versions()
        assert graph.get_state(_config("t15", "ann")).values["notes"] == ["ann's", "seen 1"]
        assert graph.get_state(_config("t16", "bob")).values["notes"] == ["bob's", "seen 1"]
        assert graph.get_state(_config("t16", "ann")).values == {}
        unrecord_steps(storage, "checkpoints", version=3)
    # The upgraded thread goes on, and a second user can now share its id.
    storage.migrate()
    assert graph.invoke({"notes": ["more"]}, _config("t15", "ann"))["notes"][-1] == "seen 3"
    graph.invoke({"notes": ["bob's too"]}, _config("t15", "bob"))
    assert graph.get_state(_config("t15", "ann")).values["notes"][-1] == "seen 3"
