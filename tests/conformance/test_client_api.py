"""Conformance: the SDK's ``add`` and ``search`` on :class:`Confide`, on both backends.

Ranking is checked with the real local MiniLM embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import confide
from confide.client import DEFAULT_ACCOUNT, Confide, SearchResult
from confide.conversation.proposals import ProposalStore
from confide.embedders import Embedder, build_embedder
from confide.engine import MemoryEngine
from confide.errors import ValidationError
from confide.storage.service.sessions import SqlServiceTables
from confide.types import MemoryFilter, MemoryType, Source

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    embedder = build_embedder("local:all-MiniLM-L6-v2", home=tmp_path_factory.mktemp("home"))
    assert embedder is not None
    embedder.embed_one("load")
    return embedder


@pytest.fixture
def app(engine: MemoryEngine, minilm: Embedder) -> Iterator[Confide]:
    client = Confide(engine, embedder=minilm)
    yield client
    client.access.close()  # the engine fixture closes the storage


def _count(app: Confide, user: str, account: str = DEFAULT_ACCOUNT) -> int:
    return len(app.engine.list_memories(MemoryFilter(account_id=account, user_id=user)))


def test_add_text_stores_one_memory_under_a_note_key_in_the_default_account(app: Confide) -> None:
    stored = app.add("Ali has a dog named Biscuit.", user_id="alice")
    assert [(m.account_id, m.key, m.value, m.type) for m in stored] == [
        ("default", "note", "Ali has a dog named Biscuit.", MemoryType.FACT)
    ]
    assert stored[0].source is Source.API
    again = app.add("Ali walks to work every morning.", user_id="alice", account_id="acme")
    assert [m.key for m in again] == ["note"]  # keys are per account and user
    more = app.add("Ali's favourite film is Amelie.", user_id="alice")
    assert [m.key for m in more] == ["note.2"]
    typed = app.add("Ali likes tea.", user_id="alice", key="drink", type="preference")
    assert [(m.key, m.type) for m in typed] == [("drink", MemoryType.PREFERENCE)]


def test_adding_the_same_text_twice_stores_nothing_the_second_time(app: Confide) -> None:
    [first] = app.add("Bob grew up in Lisbon.", user_id="bob")
    [again] = app.add("Bob grew up in Lisbon.", user_id="bob")
    assert (first.status, again.status, again.id) == ("created", "duplicate", first.id)
    assert _count(app, "bob") == 1


def test_add_messages_extracts_what_the_user_said(app: Confide) -> None:
    messages = [
        {"role": "system", "content": "You are a kind assistant. My daughter is called Zoe."},
        {"role": "user", "content": "My daughter is called Maya and I live in Porto."},
        {"role": "assistant", "content": "Lovely! My dog is called Rex."},
    ]
    stored = app.add(messages, user_id="carol")
    found = {m.key: m.value for m in stored}
    # ``city`` is a sensitive key: extraction holds it for the user's confirmation.
    assert found == {"daughter_name": "Maya"}
    assert all(m.source is Source.EXTRACTION for m in stored)
    proposals = ProposalStore(app.engine, SqlServiceTables(app.engine.storage.database))
    held = proposals.pending(account_id=DEFAULT_ACCOUNT, user_id="carol")
    assert [(p.key, p.proposed_value) for p in held] == [("city", "Porto")]
    assert app.add(messages, user_id="carol") == []  # nothing new the second time
    assert _count(app, "carol") == 1
    assert len(proposals.pending(account_id=DEFAULT_ACCOUNT, user_id="carol")) == 1


def test_search_ranks_every_category_with_scores(app: Confide) -> None:
    app.add("Dana drinks her coffee black.", user_id="dana", key="coffee", type="preference")
    app.add("Dana has a dog named Biscuit.", user_id="dana")
    app.add("Dana grew up in Lisbon.", user_id="dana", type="history")
    results = app.search("what is the name of her dog?", user_id="dana", top_k=3)
    assert all(isinstance(r, SearchResult) for r in results)
    assert results[0].memory.value == "Dana has a dog named Biscuit."
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)
    # A preference is a `context: all` category: memory_query lists it after its ranked
    # results, search ranks it.
    coffee = app.search("how does she take her coffee?", user_id="dana", top_k=1)
    assert [r.memory.key for r in coffee] == ["coffee"]
    assert coffee[0].similarity is not None and coffee[0].similarity > 0.3
    assert app.search("dog", user_id="nobody") == []
    assert len(app.search("anything", user_id="dana", top_k=2)) == 2


def test_search_is_confined_to_the_account(app: Confide) -> None:
    app.add("Eve's cat is called Tom.", user_id="eve", account_id="acme")
    assert app.search("cat", user_id="eve") == []
    assert [r.memory.account_id for r in app.search("cat", user_id="eve", account_id="acme")] == [
        "acme"
    ]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda a: a.add(42, user_id="u"), "add() takes a string or a list of messages"),
        (lambda a: a.add({"role": "user", "content": "hi"}, user_id="u"), "not dict"),
        (lambda a: a.add(["hi"], user_id="u"), "not list"),
        (lambda a: a.add([{"role": 1, "content": "x"}], user_id="u"), 'string "role"'),
        (lambda a: a.add([{"role": "user", "content": "x"}], user_id="u", key="k"), "key="),
        (lambda a: a.search(["dog"], user_id="u"), "search() takes the question as a string"),
        (lambda a: a.query("what is her dog called?"), "use search(question, user_id=...)"),
        (lambda a: a.query(["agent", "default"]), "not list"),
        (lambda a: a.engine.store("Biscuit"), "expected a NewMemory or a mapping"),
    ],
)
def test_wrong_argument_types_get_a_type_error_saying_what_is_expected(
    app: Confide, call: Any, expected: str
) -> None:
    with pytest.raises(TypeError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        call(app)


def test_bad_values_are_validation_errors(app: Confide) -> None:
    with pytest.raises(ValidationError, match="non-empty"):
        app.add("   ", user_id="u")
    with pytest.raises(ValidationError, match="role"):
        app.add([{"role": "narrator", "content": "x"}], user_id="u")
    with pytest.raises(ValidationError, match="top_k"):
        app.search("x", user_id="u", top_k=0)


def test_query_still_takes_a_dict(app: Confide) -> None:
    app.add("Fay has a dog named Biscuit.", user_id="fay")
    request = {"agent": "default", "account_id": "default", "user_id": "fay", "query": "dog"}
    texts = [r["text"] for r in app.query(request).results]
    assert texts == ["[fact] Fay has a dog named Biscuit."]


def test_search_result_is_public() -> None:
    assert confide.SearchResult is SearchResult
