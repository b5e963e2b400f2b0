"""ConfideStore: LangGraph's BaseStore over Confide memories, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.langgraph import ConfideStore
from confide.storage.base import Storage
from confide.types import MemoryFilter, NewMemory


@pytest.fixture
def sdk(engine: MemoryEngine, settings: Settings) -> Iterator[Confide]:
    client = Confide(engine, embedder=None, settings=settings)
    yield client
    client.access.close()


@pytest.fixture
def store(sdk: Confide) -> ConfideStore:
    return ConfideStore(sdk, account_id="acme")


def test_put_get_update_delete_round_trip_any_key(store: ConfideStore, sdk: Confide) -> None:
    store.put(("ann", "notes"), "user:42/pref", {"content": "likes jazz", "kind": "preference"})
    item = store.get(("ann", "notes"), "user:42/pref")
    assert item is not None
    assert (item.namespace, item.key) == (("ann", "notes"), "user:42/pref")
    assert item.value == {"content": "likes jazz", "kind": "preference"}
    store.put(("ann", "notes"), "user:42/pref", {"content": "likes blues"})
    updated = store.get(("ann", "notes"), "user:42/pref")
    assert updated is not None and updated.value == {"content": "likes blues"}
    memories = sdk.engine.list_memories(MemoryFilter(account_id="acme", user_id="ann"))
    assert [m.version for m in memories] == [2]  # a new version, as every memory update
    assert memories[0].agent_id == "notes"
    assert store.get(("ann", "other"), "user:42/pref") is None
    assert store.get(("bob", "notes"), "user:42/pref") is None
    store.delete(("ann", "notes"), "user:42/pref")
    assert store.get(("ann", "notes"), "user:42/pref") is None


def test_values_are_sealed_at_rest(store: ConfideStore, storage: Storage) -> None:
    store.put(("ann",), "secret", {"content": "the safe code is 0451"})
    with storage.reader_across_accounts() as db:  # type: ignore[attr-defined]
        rows = db.run("SELECT ciphertext FROM memories").fetchall()
    assert rows and all(b"0451" not in bytes(r[0]) for r in rows)


def test_search_uses_retrieval_and_filters(store: ConfideStore, sdk: Confide) -> None:
    store.put(("ann", "notes"), "a", {"content": "her dog is called Biscuit", "kind": "pet"})
    store.put(("ann", "notes"), "b", {"content": "she grew up in Lisbon", "kind": "place"})
    store.put(("ann", "todo"), "c", {"content": "walk Biscuit at noon", "kind": "task"})
    sdk.engine.store(
        NewMemory(account_id="acme", user_id="ann", key="pet_name", value="Biscuit the dog")
    )
    found = store.search(("ann",), query="Biscuit")
    assert {(i.namespace, i.key) for i in found} == {
        (("ann", "notes"), "a"),
        (("ann", "todo"), "c"),
        (("ann",), "pet_name"),
    }
    assert all(i.score is not None for i in found)
    notes = store.search(("ann", "notes"), query="Biscuit")
    assert [i.key for i in notes] == ["a"]
    tasks = store.search(("ann",), filter={"kind": "task"})
    assert [i.key for i in tasks] == ["c"]
    assert len(store.search(("ann",), limit=2)) == 2
    assert store.search(("bob",), query="Biscuit") == []
    native = store.get(("ann",), "pet_name")
    assert native is not None and native.value["content"] == "Biscuit the dog"


def test_list_namespaces_and_a_namespace_needs_a_user(store: ConfideStore) -> None:
    store.put(("ann", "notes"), "a", {"content": "x"})
    store.put(("ann", "todo", "today"), "b", {"content": "y"})
    assert store.list_namespaces(prefix=("ann",)) == [
        ("ann", "notes"),
        ("ann", "todo", "today"),
    ]
    assert store.list_namespaces(prefix=("ann",), max_depth=2) == [
        ("ann", "notes"),
        ("ann", "todo"),
    ]
    with pytest.raises(ValidationError, match="starts with the user"):
        store.search((), query="x")
    with pytest.raises(ValidationError, match="prefix"):
        store.list_namespaces()


@pytest.mark.asyncio
async def test_a_graph_node_reads_and_writes_the_store(store: ConfideStore) -> None:
    class State(TypedDict):
        question: str
        answer: str

    async def node(state: State, *, store: BaseStore) -> dict[str, Any]:
        await store.aput(("ann", "facts"), "city", {"content": "lives in Porto"})
        hits = await store.asearch(("ann",), query=state["question"])
        return {"answer": hits[0].value["content"] if hits else ""}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    graph = builder.compile(store=store)
    result = await graph.ainvoke({"question": "Porto", "answer": ""})
    assert result["answer"] == "lives in Porto"
