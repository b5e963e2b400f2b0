"""ConfideStore: LangGraph's BaseStore over Confide memories, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from tests.conftest import SCRIBE_CATEGORIES

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import PermissionDeniedError, ValidationError
from confide.gate import Principal, Scope
from confide.langgraph import ConfideStore
from confide.storage.base import Storage
from confide.types import MemoryFilter, MemoryType, NewMemory


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


@pytest.fixture
def scribe_sdk(engine: MemoryEngine, settings: Settings) -> Iterator[Confide]:
    client = Confide(
        engine,
        embedder=None,
        settings=settings.model_copy(update={"categories_file": SCRIBE_CATEGORIES}),
    )
    for key, text, kind in (
        ("city", "Ann lives in Porto", MemoryType.FACT),
        ("drink", "Ann drinks green tea in Porto", MemoryType.PREFERENCE),
        ("dentist", "Ann must call the dentist in Porto", MemoryType.FOLLOW_UP),
        ("mood", "Ann feels lonely in Porto", MemoryType.WELLBEING),
    ):
        engine.store(NewMemory(account_id="acme", user_id="ann", key=key, value=text, type=kind))
    yield client
    client.access.close()


def test_store_reads_carry_the_agents_categories_only(scribe_sdk: Confide) -> None:
    store = ConfideStore(scribe_sdk, account_id="acme", agent="scribe")
    store.put(("ann", "notes"), "plan", {"content": "visit Porto in May"})
    allowed = {(("ann",), "city"), (("ann",), "drink"), (("ann", "notes"), "plan")}
    assert {(i.namespace, i.key) for i in store.search(("ann",))} == allowed
    assert {(i.namespace, i.key) for i in store.search(("ann",), query="Porto")} == allowed
    assert store.get(("ann",), "city") is not None
    assert store.get(("ann",), "dentist") is None
    assert store.get(("ann",), "mood") is None
    # Deleting what the agent cannot read changes nothing.
    store.delete(("ann",), "mood")
    everything = ConfideStore(scribe_sdk, account_id="acme")
    assert {i.key for i in everything.search(("ann",))} == {
        "city",
        "drink",
        "dentist",
        "mood",
        "plan",
    }
    # An agent the principal is not bound to is refused.
    principal = Principal(account_id="acme", agents=("default",))
    with pytest.raises(PermissionDeniedError):
        ConfideStore(scribe_sdk, principal=principal, agent="scribe")


def test_a_read_principal_cannot_write_through_the_store(sdk: Confide) -> None:
    writer = ConfideStore(sdk, account_id="acme")
    writer.put(("ann",), "city", {"content": "lives in Porto"})
    reader = ConfideStore(sdk, principal=Principal(account_id="acme", scope=Scope.READ))
    assert reader.get(("ann",), "city") is not None
    with pytest.raises(PermissionDeniedError):
        reader.put(("ann",), "city", {"content": "lives in Lisbon"})
    with pytest.raises(PermissionDeniedError):
        reader.put(("ann",), "new", {"content": "x"})
    with pytest.raises(PermissionDeniedError):
        reader.delete(("ann",), "city")
    item = writer.get(("ann",), "city")
    assert item is not None and item.value == {"content": "lives in Porto"}


def test_app_memories_are_for_admins_only(sdk: Confide) -> None:
    sdk.engine.store(
        NewMemory(
            account_id="acme",
            user_id="app:concierge",
            app_id="concierge",
            key="greeting",
            value="Welcome to the hotel",
        )
    )
    service = ConfideStore(sdk, account_id="acme")
    app = ("app:concierge",)
    for read in (
        lambda: service.get(app, "greeting"),
        lambda: service.search(app),
        lambda: service.search(app, query="hotel"),
        lambda: service.list_namespaces(prefix=app),
        lambda: service.put(app, "greeting", {"content": "Go away"}),
    ):
        with pytest.raises(PermissionDeniedError):
            read()
    admin = ConfideStore(sdk, principal=Principal(account_id="acme", scope=Scope.ADMIN))
    found = admin.get(app, "greeting")
    assert found is not None and found.value["content"] == "Welcome to the hotel"
    assert [i.key for i in admin.search(app)] == ["greeting"]
    admin.put(app, "farewell", {"content": "Goodbye"})
    stored = sdk.engine.list_memories(
        MemoryFilter(account_id="acme", user_id="app:concierge", app_id="concierge")
    )
    assert len(stored) == 2  # the app's scope holds the new item
    assert {i.key for i in admin.search(app)} == {"greeting", "farewell"}


def test_a_pinned_principal_reads_its_own_user_only(sdk: Confide) -> None:
    ConfideStore(sdk, account_id="acme").put(("bob",), "city", {"content": "Lima"})
    pinned = ConfideStore(sdk, principal=Principal(account_id="acme", user_id="ann"))
    pinned.put(("ann",), "city", {"content": "Porto"})
    assert [i.key for i in pinned.search(("ann",))] == ["city"]
    with pytest.raises(PermissionDeniedError):
        pinned.get(("bob",), "city")
    with pytest.raises(PermissionDeniedError):
        pinned.search(("bob",), query="Lima")
