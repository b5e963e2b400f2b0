"""``retrieve``: the message window, the long-term and semantic tiers, metadata, and a
failing tier left out while the rest still answers (both backends)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.chat.conftest import ApiFactory

from confide.chat import ChatMemory
from confide.chat.history import LONG_TERM_HEADER, SEMANTIC_HEADER
from confide.embedders.openai import OpenAICompatibleEmbedder
from confide.engine import MemoryEngine
from confide.index.memory_text import indexed_text
from confide.index.vectors import VectorIndexer
from confide.testing.builders import add
from confide.testing.embedders import HashingEmbedder
from confide.testing.scripted_llm import ScriptedLLMServer

ACCOUNT = "acct-1"


def _say(chat: ChatMemory, i: int, content: str | None = None, **extra: Any) -> None:
    chat.add_message(
        {
            "account_id": ACCOUNT,
            "user_id": "user-1",
            "conversation_id": "c1",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": content or f"turn {i}",
            **extra,
        }
    )


def test_window_holds_the_newest_messages_oldest_first(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    for i in range(25):
        _say(chat, i)
    history = chat.retrieve("hello", account_id=ACCOUNT, user_id="user-1", conversation_id="c1")
    assert [m["content"] for m in history.messages] == [f"turn {i}" for i in range(5, 25)]
    assert {m["role"] for m in history.messages} == {"user", "assistant"}
    assert all(set(m) == {"role", "content", "timestamp"} for m in history.messages)
    meta = history.metadata
    assert meta.conversation_id == "c1" and meta.message_count == 20
    assert meta.oldest_message_timestamp is not None and meta.newest_message_timestamp
    assert meta.oldest_message_timestamp <= meta.newest_message_timestamp
    assert history.messages[0]["timestamp"] == meta.oldest_message_timestamp.isoformat()
    assert not meta.has_long_term_context and not meta.has_semantic_context
    assert history.context_messages == []
    empty = chat.retrieve("hi", account_id=ACCOUNT, user_id="user-1", conversation_id="none")
    assert empty.messages == [] and empty.metadata.oldest_message_timestamp is None


def test_long_term_tier_finds_important_memories_by_keyword(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    _say(chat, 0)
    add(engine, key="grandson", value="Her grandson Theo plays the cello", importance=4)
    add(engine, key="cello_minor", value="Cello lessons were on Tuesdays", importance=2)
    add(engine, key="other_user", value="Theo the cello tutor", importance=5, user_id="user-2")
    for i in range(7):
        add(engine, key=f"cello_{i}", value=f"cello fact number {i}", importance=3)
    history = chat.retrieve(
        "what does Theo play? the cello?",
        account_id=ACCOUNT,
        user_id="user-1",
        conversation_id="c1",
    )
    assert history.metadata.has_long_term_context
    [context] = history.context_messages
    lines = context.content.split("\n")
    assert lines[0] == LONG_TERM_HEADER
    assert lines[1] == "- Her grandson Theo plays the cello"
    assert len(lines) == 1 + 5  # at most five bullets
    assert all(line.startswith("- ") for line in lines[1:])
    assert "Tuesdays" not in context.content and "tutor" not in context.content


def _with_vectors(engine: MemoryEngine) -> HashingEmbedder:
    embedder = HashingEmbedder()
    engine.add_indexer(VectorIndexer(engine.storage, embedder, link_top_k=0))
    return embedder


def test_semantic_tier_needs_similarity_of_at_least_0_8(engine: MemoryEngine) -> None:
    embedder = _with_vectors(engine)
    chat = ChatMemory(engine, embedder=embedder)
    _say(chat, 0)
    garden = add(engine, key="garden", value="roses bloom in the garden every june")
    add(engine, key="kettle", value="the kettle whistles loudly", importance=1)
    # The memory's indexed text (date and value) as input: cosine 1 under the fake embedder.
    history = chat.retrieve(
        indexed_text(garden),
        account_id=ACCOUNT,
        user_id="user-1",
        conversation_id="c1",
    )
    assert history.metadata.has_semantic_context
    assert not history.metadata.has_long_term_context
    [context] = history.context_messages
    assert context.content == f"{SEMANTIC_HEADER}\n- roses bloom in the garden every june"


def test_a_failing_tier_is_left_out_and_the_rest_returned(
    engine: MemoryEngine, caplog: pytest.LogCaptureFixture
) -> None:
    # No /embeddings on the scripted LLM server: every embedding fails.
    with (
        ScriptedLLMServer() as server,
        OpenAICompatibleEmbedder(model="absent", base_url=server.base_url, dims=64) as broken,
    ):
        chat = ChatMemory(engine, embedder=broken)
        _say(chat, 0, "my secret input words")
        add(engine, key="grandson", value="Her grandson Theo plays the cello", importance=4)
        history = chat.retrieve(
            "Theo cello", account_id=ACCOUNT, user_id="user-1", conversation_id="c1"
        )
    assert history.metadata.has_long_term_context
    assert not history.metadata.has_semantic_context
    assert [m["content"] for m in history.messages] == ["my secret input words"]
    assert "history tier semantic failed: ProviderError" in caplog.text
    assert "Theo" not in caplog.text and "secret" not in caplog.text


@pytest.mark.asyncio
async def test_retrieve_over_http_uses_camel_case(
    chat_api: ApiFactory, engine: MemoryEngine
) -> None:
    async with chat_api() as api:
        await api.say("c1", "user-1", "Tell me about Theo")
        await api.say("c1", "user-1", "He is your grandson", role="assistant")
        add(engine, key="grandson", value="Her grandson Theo plays the cello", importance=4)
        response = await api.post(
            "/v1/conversations/c1/retrieve", {"user_id": "user-1", "input": "Theo cello"}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"messages", "contextMessages", "metadata"}
        assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
        assert body["contextMessages"] == [
            {
                "role": "system",
                "content": f"{LONG_TERM_HEADER}\n- Her grandson Theo plays the cello",
            }
        ]
        meta = body["metadata"]
        assert set(meta) == {
            "conversationId",
            "messageCount",
            "oldestMessageTimestamp",
            "newestMessageTimestamp",
            "hasLongTermContext",
            "hasSemanticContext",
            "hasSummaryContext",
        }
        assert meta["conversationId"] == "c1" and meta["messageCount"] == 2
        assert meta["hasLongTermContext"] is True and meta["hasSemanticContext"] is False
        assert meta["hasSummaryContext"] is False
        other = await api.post(
            "/v1/conversations/c1/retrieve", {"user_id": "user-2", "input": "Theo"}
        )
        assert other.status_code == 404
        bad = await api.post("/v1/conversations/c1/retrieve", {"user_id": "user-1"})
        assert bad.status_code == 400
