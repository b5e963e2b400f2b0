"""One suite for the SDK: embedded (``Confide.open``) and remote (``Confide.remote`` and
``Confide.remote_async`` against the service on a loopback socket), on both backends.

Each test drives whichever client it is given through :func:`_`, which awaits the async
remote's calls; what comes back and what is raised must be the same for all three.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from confide.client import Confide, SearchResult
from confide.config import Settings
from confide.errors import (
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    StorageError,
    ValidationError,
)
from confide.remote import AsyncRemoteConfide, RemoteConfide, RemoteUnavailableError
from confide.server import create_app
from confide.testing.loopback import serve_on_loopback
from confide.types import HistoryEventType, Memory, MemoryFilter, MemoryType, NewMemory, Source

pytestmark = pytest.mark.asyncio
KINDS = ["embedded", "remote", "remote_async"]
Client = Confide | RemoteConfide | AsyncRemoteConfide


async def _(value: Any) -> Any:
    """The call's result, awaited when the client is the async one."""
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
    token = app.state.services.keys.create("default")
    with serve_on_loopback(app) as url:
        yield url, token


@pytest_asyncio.fixture(params=KINDS)
async def sdk(request: pytest.FixtureRequest, sdk_settings: Settings) -> AsyncIterator[Client]:
    if request.param == "embedded":
        embedded = Confide.open(sdk_settings)
        yield embedded
        embedded.close()
        return
    url, token = request.getfixturevalue("served")
    if request.param == "remote":
        with Confide.remote(url, token) as remote:
            yield remote
    else:
        async with Confide.remote_async(url, token) as aremote:
            yield aremote


async def test_add_text_stores_one_memory_and_skips_a_duplicate(sdk: Client) -> None:
    stored = await _(sdk.add("Ali has a dog named Biscuit.", user_id="alice"))
    assert [(m.account_id, m.user_id, m.key, m.value, m.type) for m in stored] == [
        ("default", "alice", "note", "Ali has a dog named Biscuit.", MemoryType.FACT)
    ]
    assert isinstance(stored[0], Memory) and stored[0].source is Source.API
    [again] = await _(sdk.add("Ali has a dog named Biscuit.", user_id="alice"))
    assert (again.status, again.id) == ("duplicate", stored[0].id)
    more = await _(sdk.add("Ali's favourite film is Amelie.", user_id="alice"))
    assert [m.key for m in more] == ["note.2"]
    typed = await _(sdk.add("Ali likes tea.", user_id="alice", key="drink", type="preference"))
    assert [(m.key, m.type) for m in typed] == [("drink", MemoryType.PREFERENCE)]


async def test_add_messages_extracts_what_the_user_said(sdk: Client) -> None:
    messages = [
        {"role": "system", "content": "You are kind. My daughter is called Zoe."},
        {"role": "user", "content": "My daughter is called Maya and I live in Porto."},
        {"role": "assistant", "content": "Lovely! My dog is called Rex."},
    ]
    stored = await _(sdk.add(messages, user_id="carol"))
    # city is sensitive: it waits as a proposal (filed once, however often it is heard).
    assert {m.key: m.value for m in stored} == {"daughter_name": "Maya"}
    assert all(m.source is Source.EXTRACTION and m.status == "created" for m in stored)
    # Extraction skips the keys the user has: nothing is found to store or to match.
    assert await _(sdk.add(messages, user_id="carol")) == []


async def test_search_and_query_find_the_memory(sdk: Client) -> None:
    await _(sdk.add("Dana has a dog named Biscuit.", user_id="dana"))
    await _(sdk.add("Dana grew up in Lisbon.", user_id="dana", type="history"))
    results = await _(sdk.search("Biscuit", user_id="dana", top_k=2))
    assert all(isinstance(r, SearchResult) for r in results)
    assert results[0].memory.value == "Dana has a dog named Biscuit."
    assert isinstance(results[0].score, float) and results[0].similarity is None  # no embedder
    assert await _(sdk.search("Biscuit", user_id="nobody")) == []
    request = {"agent": "default", "account_id": "default", "user_id": "dana", "query": "Lisbon"}
    answer = await _(sdk.query(request))
    assert [r["text"] for r in answer.results] == ["[history] Dana grew up in Lisbon."]
    assert answer.tokens > 0


async def test_engine_operations_version_forget_restore_and_history(sdk: Client) -> None:
    new = NewMemory(account_id="default", user_id="erin", key="city", value="Oslo")
    stored = await _(sdk.engine.store(new))
    assert (stored.key, stored.value, stored.version) == ("city", "Oslo", 1)
    assert (await _(sdk.engine.get(stored.id, account_id="default"))).value == "Oslo"
    updated = await _(sdk.engine.update(stored.id, {"value": "Bergen"}, account_id="default"))
    assert (updated.value, updated.version, updated.lineage_id) == ("Bergen", 2, stored.lineage_id)
    listed = await _(sdk.engine.list_memories(MemoryFilter(account_id="default", user_id="erin")))
    assert [m.id for m in listed] == [updated.id]
    forgotten = await _(sdk.engine.forget(updated.id, account_id="default"))
    assert forgotten.state.value == "soft_deleted"
    assert (
        await _(sdk.engine.list_memories(MemoryFilter(account_id="default", user_id="erin"))) == []
    )
    restored = await _(sdk.engine.restore(updated.id, account_id="default"))
    assert restored.state.value == "active"
    with pytest.raises(ConflictError):
        await _(sdk.engine.restore(updated.id, account_id="default"))
    events = await _(sdk.engine.history(updated.id, account_id="default"))
    assert [e.event for e in events] == [
        HistoryEventType.RESTORE,
        HistoryEventType.DELETE,
        HistoryEventType.UPDATE,
        HistoryEventType.ADD,
    ]
    with pytest.raises(PreconditionFailedError):
        await _(
            sdk.engine.update(
                updated.id,
                {"value": "Tromsø"},
                account_id="default",
                expected_row_version=restored.row_version - 1,
            )
        )


async def test_errors_are_the_same_typed_errors(sdk: Client) -> None:
    with pytest.raises(NotFoundError):
        await _(sdk.engine.get("00000000-0000-0000-0000-000000000000", account_id="default"))
    with pytest.raises(ValidationError, match="non-empty"):
        await _(sdk.add("   ", user_id="u"))
    with pytest.raises(ValidationError, match="role"):
        await _(sdk.add([{"role": "narrator", "content": "x"}], user_id="u"))
    with pytest.raises(ValidationError, match="top_k"):
        await _(sdk.search("x", user_id="u", top_k=0))
    with pytest.raises(PermissionDeniedError):
        await _(
            sdk.query({"agent": "ghost", "account_id": "default", "user_id": "u", "query": "x"})
        )
    with pytest.raises(TypeError, match=re.escape("add() takes a string or a list of messages")):
        await _(sdk.add(42, user_id="u"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape("search() takes the question as a string")):
        await _(sdk.search(["dog"], user_id="u"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape("use search(question, user_id=...)")):
        await _(sdk.query("what is her dog called?"))  # type: ignore[arg-type]


# ---- remote only: the key decides the account; an unreachable service --------------------------


@pytest.mark.parametrize("storage_url", ["sqlite"], indirect=True)
async def test_remote_refuses_another_account_and_a_bad_key(served: tuple[str, str]) -> None:
    url, token = served
    with Confide.remote(url, token) as remote:
        assert remote.account_id == "default"
        with pytest.raises(PermissionDeniedError, match="not valid for this account"):
            remote.add("Hi there.", user_id="u", account_id="acme")
        with pytest.raises(PermissionDeniedError, match="not valid for this account"):
            remote.engine.get("x", account_id="acme")
    with Confide.remote(url, token + "x") as bad, pytest.raises(PermissionDeniedError):
        bad.add("Hi there.", user_id="u")
    async with Confide.remote_async(url, "cfk_no_such") as abad:
        with pytest.raises(PermissionDeniedError, match="Invalid API key"):
            await abad.search("x", user_id="u")


async def test_remote_unreachable_is_a_storage_error() -> None:
    with Confide.remote("http://127.0.0.1:9", "cfk_a_b", timeout=2) as remote:
        with pytest.raises(RemoteUnavailableError) as caught:
            remote.search("x", user_id="u")
        assert isinstance(caught.value, StorageError)
