"""The everyday SDK surface (get, get_all, update, delete, restore, history, export, erase)
with the account defaulted, on every client alike: embedded (``Confide.open``), its asyncio
twin (``Confide.open_async``), and remote (``Confide.remote`` / ``Confide.remote_async``, over
the service on a loopback socket, with an admin key: the embedded SDK acts as the operator).
Both backends. An id a caller holds keeps naming its memory across updates.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from confide.client import AsyncConfide, Confide
from confide.config import Settings
from confide.errors import ConflictError, NotFoundError, ValidationError
from confide.remote import AsyncRemoteConfide, RemoteConfide
from confide.server import create_app
from confide.testing.loopback import serve_on_loopback
from confide.types import AddResult, HistoryEventType, Memory, MemoryState, MemoryType

pytestmark = pytest.mark.asyncio
KINDS = ["embedded", "embedded_async", "remote", "remote_async"]
Client = Confide | AsyncConfide | RemoteConfide | AsyncRemoteConfide


async def _(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@pytest.fixture
def sdk_settings(tmp_path: Path, storage_url: str, key_store_url: str) -> Settings:
    return Settings(
        home=tmp_path / "home",
        encryption_key=bytes(range(32)).hex(),
        storage_url=storage_url,
        keystore_url=key_store_url,
        embedder="none",
    )


@pytest.fixture
def served(sdk_settings: Settings) -> Iterator[tuple[str, str]]:
    app = create_app(sdk_settings, warm_up=False)
    token = app.state.services.keys.create("default", admin=True)
    with serve_on_loopback(app) as url:
        yield url, token


@pytest_asyncio.fixture(params=KINDS)
async def sdk(request: pytest.FixtureRequest, sdk_settings: Settings) -> AsyncIterator[Client]:
    if request.param == "embedded":
        with Confide.open(sdk_settings) as embedded:
            yield embedded
        return
    if request.param == "embedded_async":
        async with Confide.open_async(sdk_settings) as awaited:
            yield awaited
        return
    url, token = request.getfixturevalue("served")
    if request.param == "remote":
        with Confide.remote(url, token) as remote:
            yield remote
    else:
        async with Confide.remote_async(url, token) as aremote:
            yield aremote


async def test_add_says_whether_it_stored_or_matched(sdk: Client) -> None:
    [first] = await _(sdk.add("Ali has a dog named Biscuit.", user_id="ali"))
    assert isinstance(first, AddResult) and isinstance(first, Memory)
    assert (first.status, first.similarity, first.key) == ("created", None, "note")
    [again] = await _(sdk.add("ali has a dog named Biscuit", user_id="ali"))
    assert (again.status, again.id, again.value) == ("duplicate", first.id, first.value)
    assert again.similarity == 1.0 and again.memory == first.memory


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Meeting with Sam on Monday", "Meeting with Sam on Tuesday"),
        ("Timing note number 0 about tea", "Timing note number 1 about tea"),
        ("Likes green tea", "Does not like green tea"),
        ("Lunch with Sam", "Lunch with Alex"),
    ],
)
async def test_facts_that_differ_in_a_marker_are_both_stored(
    sdk: Client, one: str, other: str
) -> None:
    [a] = await _(sdk.add(one, user_id="sam"))
    [b] = await _(sdk.add(other, user_id="sam"))
    assert (a.status, b.status) == ("created", "created") and a.id != b.id
    listed = await _(sdk.get_all(user_id="sam"))
    assert sorted(m.value for m in listed) == sorted([one, other])


async def test_an_id_keeps_naming_its_memory_across_updates(sdk: Client) -> None:
    [added] = await _(sdk.add("Lives in Oslo", user_id="erin", key="city"))
    first = added.id
    moved = await _(sdk.update(first, "Lives in Bergen"))
    assert (moved.value, moved.version, moved.lineage_id) == (
        "Lives in Bergen",
        2,
        added.lineage_id,
    )
    assert moved.id != first
    now = await _(sdk.get(first))
    assert (now.id, now.value, now.state) == (moved.id, "Lives in Bergen", MemoryState.ACTIVE)
    # The old id still updates the memory, fields by name too.
    again = await _(sdk.update(first, {"value": "Lives in Tromsø", "importance": 4}))
    assert (again.version, again.importance) == (3, 4)
    assert (await _(sdk.get(moved.id))).id == again.id
    events = await _(sdk.history(first))
    assert [e.event for e in events] == [
        HistoryEventType.UPDATE,
        HistoryEventType.UPDATE,
        HistoryEventType.ADD,
    ]
    forgotten = await _(sdk.delete(first))
    assert (forgotten.id, forgotten.state) == (again.id, MemoryState.SOFT_DELETED)
    assert await _(sdk.get_all(user_id="erin")) == []
    assert [m.id for m in await _(sdk.get_all(user_id="erin", include_forgotten=True))] == [
        again.id
    ]
    assert (await _(sdk.get(first))).state is MemoryState.SOFT_DELETED
    with pytest.raises(ConflictError):
        await _(sdk.update(first, "Lives in Lima"))
    with pytest.raises(ConflictError):
        await _(sdk.delete(first))
    restored = await _(sdk.restore(first))
    assert (restored.id, restored.state) == (again.id, MemoryState.ACTIVE)
    with pytest.raises(NotFoundError):
        await _(sdk.get("00000000-0000-4000-8000-000000000000"))
    with pytest.raises(ValidationError):
        await _(sdk.update(first, {"key": "town"}))


async def test_get_all_filters_and_pages(sdk: Client) -> None:
    await _(sdk.add("Walks every morning", user_id="fay", key="habit", type="history"))
    await _(sdk.add("Prefers tea to coffee", user_id="fay", key="drink", type="preference"))
    await _(sdk.add("Has a cat named Tom", user_id="fay", key="pet"))
    everything = await _(sdk.get_all(user_id="fay"))
    assert [m.key for m in everything] == ["pet", "drink", "habit"]  # newest first
    page = await _(sdk.get_all(user_id="fay", limit=2, offset=1))
    assert [m.key for m in page] == ["drink", "habit"]
    typed = await _(sdk.get_all(user_id="fay", filters={"type": ["history", "preference"]}))
    assert [m.key for m in typed] == ["drink", "habit"]
    one = await _(sdk.get_all(user_id="fay", filters={"type": "preference"}))
    assert [(m.key, m.type) for m in one] == [("drink", MemoryType.PREFERENCE)]
    with pytest.raises(ValidationError, match="unknown filter colour"):
        await _(sdk.get_all(user_id="fay", filters={"colour": "red"}))
    with pytest.raises(ValidationError):
        await _(sdk.get_all(user_id="fay", limit=0))


async def test_export_and_erase_a_user(sdk: Client) -> None:
    await _(sdk.add("Grew up in Lisbon", user_id="gil", key="hometown"))
    document = await _(sdk.export(user_id="gil"))
    assert [m["value"] for m in document["memories"]] == ["Grew up in Lisbon"]
    receipt = await _(sdk.erase(user_id="gil"))
    assert (receipt.account_id, receipt.user_id) == ("default", "gil")
    assert receipt.deleted.get("memories", 0) >= 1
    assert await _(sdk.get_all(user_id="gil")) == []
