"""``retrieve``'s summaries tier (the best 3 chunks above their own threshold, the real local
embedder deciding the cosine), the window following the channel, and the older three-tier
form (``memory_context``), in the SDK and over HTTP, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from tests.chat.conftest import ApiFactory

from confide.chat import ChatMemory
from confide.chat.facts import FACT_MEMORY_CATEGORY
from confide.chat.history import CHUNK_CATEGORY, LONG_TERM_HEADER, SUMMARY_HEADER
from confide.embedders.local import LocalMiniLMEmbedder
from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.testing.builders import add
from confide.types import MemoryType

ACCOUNT = "acct-1"
WORK = "Joe worked as a carpenter in Leeds for twenty years and loved it."
GARDEN = "Joe talked about his garden. He grows tomatoes and beans."
HOLIDAY = "Joe described his holiday in Spain last spring."
DAUGHTER = "Joe said his daughter Amy visits on Sundays."
DOG = "Joe mentioned his old dog Rex."
KETTLE = "The kettle was descaled with vinegar on Tuesday."
QUESTION = "what did Joe do for work?"

pytestmark = pytest.mark.slow

STORED = datetime(2026, 11, 29, 12, tzinfo=UTC)
"""The tests' clock: a summary's vector embeds the day it was stored, and near cosines (the
third and fourth best summaries below) change places from one day to another."""


@pytest.fixture(autouse=True)
def _clock() -> Iterator[None]:
    with time_machine.travel(STORED, tick=True):
        yield


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def _chat(engine: MemoryEngine, minilm: LocalMiniLMEmbedder) -> ChatMemory:
    engine.add_indexer(VectorIndexer(engine.storage, minilm, link_top_k=0))
    return ChatMemory(engine, embedder=minilm)


def _say(chat: ChatMemory, content: str, conversation: str = "c1", **extra: Any) -> None:
    chat.add_message(
        {
            "account_id": ACCOUNT,
            "user_id": "user-1",
            "conversation_id": conversation,
            "role": "user",
            "content": content,
            **extra,
        }
    )


def _chunk(engine: MemoryEngine, n: int, value: str, subject: str | None = "joe") -> str:
    memory = add(
        engine,
        key=f"conversation_summary.{20 * n}-{20 * n + 20}",
        value=value,
        type=MemoryType.EPISODIC,
        category=CHUNK_CATEGORY,
        subject_id=subject,
    )
    return memory.id


def test_the_best_three_summaries_reach_the_turn_above_their_threshold(
    engine: MemoryEngine, minilm: LocalMiniLMEmbedder
) -> None:
    chat = _chat(engine, minilm)
    _say(chat, "Tell me about Joe again.", subject_id="joe")
    for n, value in enumerate((DOG, WORK, DAUGHTER, GARDEN, HOLIDAY)):
        _chunk(engine, n, value)
    _chunk(engine, 5, "Joe worked as a plumber in York.", subject="maya")  # another subject
    _chunk(engine, 6, "Joe worked in a bakery.", subject=None)  # about no subject
    history = chat.retrieve(QUESTION, account_id=ACCOUNT, user_id="user-1", conversation_id="c1")
    assert history.metadata.has_summary_context
    [summaries] = [c for c in history.context_messages if c.content.startswith(SUMMARY_HEADER)]
    # The cosines (MiniLM) are 0.59, 0.56 and 0.45 for these three, 0.43 and 0.42 for the
    # two left out: far below the 0.8 of the semantic tier, where none would show.
    assert summaries.content.split("\n") == [SUMMARY_HEADER, f"- {WORK}", f"- {GARDEN}",
                                             f"- {HOLIDAY}"]  # fmt: skip
    # An agent whose allowlist leaves summaries out sees none.
    narrowed = chat.retrieve(
        QUESTION,
        account_id=ACCOUNT,
        user_id="user-1",
        conversation_id="c1",
        categories=["fact", "preference"],
    )
    assert not narrowed.metadata.has_summary_context


def test_an_unrelated_summary_stays_below_the_threshold(
    engine: MemoryEngine, minilm: LocalMiniLMEmbedder
) -> None:
    chat = _chat(engine, minilm)
    _say(chat, "Good morning.")
    _chunk(engine, 0, KETTLE, subject=None)  # cosine 0.11 to the question
    history = chat.retrieve(QUESTION, account_id=ACCOUNT, user_id="user-1", conversation_id="c1")
    assert not history.metadata.has_summary_context
    assert chat.settings.history_summary_min_cosine == 0.15
    chat.history.summary_min = 0.05
    again = chat.retrieve(QUESTION, account_id=ACCOUNT, user_id="user-1", conversation_id="c1")
    assert again.context_messages[0].content == f"{SUMMARY_HEADER}\n- {KETTLE}"


def test_the_window_follows_the_channel(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine)
    _say(chat, "web one", channel="web")
    _say(chat, "sms one", channel="sms")
    _say(chat, "no channel")
    _say(chat, "web two", channel="web")

    def window(channel: str | None) -> list[str]:
        history = chat.retrieve(
            "hi", account_id=ACCOUNT, user_id="user-1", conversation_id="c1", channel=channel
        )
        return [m["content"] for m in history.messages]

    assert window("web") == ["web one", "no channel", "web two"]
    assert window("sms") == ["sms one", "no channel"]
    assert window(None) == ["web one", "sms one", "no channel", "web two"]
    assert window("voice") == ["no channel"]
    # The window's size counts the channel's messages only.
    for i in range(25):
        _say(chat, f"sms {i}", channel="sms")
    assert window("web") == ["web one", "no channel", "web two"]
    assert len(window("sms")) == 20 and window("sms")[-1] == "sms 24"


def _seed_tiers(engine: MemoryEngine) -> dict[str, str]:
    """A summary chunk, an important memory, one that echoes the question and a subject
    fact, all about Joe."""
    return {
        "chunk": _chunk(engine, 0, WORK),
        "workshop": add(
            engine, key="workshop", value="Joe keeps his workshop tools in the shed", importance=4
        ).id,
        "echo": add(engine, key="echo", value=QUESTION, importance=1).id,
        "fact": add(
            engine,
            key="fact_joe",
            value="Joe is a retired carpenter",
            category=FACT_MEMORY_CATEGORY,
            subject_id="joe",
            metadata={"fact_category": "occupation"},
        ).id,
    }


def test_memory_context_gives_the_same_findings_in_three_tiers(
    engine: MemoryEngine, minilm: LocalMiniLMEmbedder
) -> None:
    chat = _chat(engine, minilm)
    _say(chat, "Joe came round yesterday.", subject_id="joe")
    ids = _seed_tiers(engine)
    tiers = chat.memory_context(
        QUESTION, account_id=ACCOUNT, user_id="user-1", conversation_id="c1"
    )
    assert [m["content"] for m in tiers.short_term] == ["Joe came round yesterday."]
    assert set(tiers.short_term[0]) == {"role", "content", "timestamp"}
    assert [(i.kind, i.id) for i in tiers.long_term] == [
        ("summary", ids["chunk"]),
        ("memory", ids["workshop"]),
        ("fact", ids["fact"]),
    ]
    summary, workshop, fact = tiers.long_term
    assert summary.content == WORK and summary.category == CHUNK_CATEGORY
    assert summary.score is not None and 0.15 <= summary.score < 0.8
    assert workshop.score is None  # found by keyword
    assert fact.content == "Joe is a retired carpenter" and fact.category == FACT_MEMORY_CATEGORY
    [echo] = tiers.semantic
    assert echo.id == ids["echo"] and echo.kind == "memory"
    assert echo.score is not None and echo.score >= 0.8
    # The flat form holds the same findings.
    flat = chat.retrieve(QUESTION, account_id=ACCOUNT, user_id="user-1", conversation_id="c1")
    headers = [c.content.split("\n")[0] for c in flat.context_messages]
    assert headers[:2] == [LONG_TERM_HEADER, SUMMARY_HEADER]
    assert flat.metadata.has_long_term_context and flat.metadata.has_semantic_context


@pytest.mark.asyncio
async def test_memory_context_and_the_channel_over_http(
    chat_api: ApiFactory, engine: MemoryEngine, minilm: LocalMiniLMEmbedder
) -> None:
    async with chat_api(embedder=minilm) as api:
        await api.say("c1", "user-1", "Joe came round yesterday.", subject_id="joe")
        ids = _seed_tiers(engine)
        await api.say("c1", "user-1", "On the website now.", channel="web")
        body = {"user_id": "user-1", "input": QUESTION, "channel": "web"}
        response = await api.post("/v1/conversations/c1/memory_context", body)
        assert response.status_code == 200, response.text
        tiers = response.json()
        assert set(tiers) == {"shortTerm", "longTerm", "semantic"}
        assert [m["content"] for m in tiers["shortTerm"]] == [
            "Joe came round yesterday.",
            "On the website now.",
        ]
        assert [(i["kind"], i["id"]) for i in tiers["longTerm"]] == [
            ("summary", ids["chunk"]),
            ("memory", ids["workshop"]),
            ("fact", ids["fact"]),
        ]
        assert set(tiers["longTerm"][0]) == {"id", "kind", "content", "category", "createdAt",
                                             "score"}  # fmt: skip
        assert [i["id"] for i in tiers["semantic"]] == [ids["echo"]]
        await api.say("c1", "user-1", "And now by text.", channel="sms")
        flat = await api.post("/v1/conversations/c1/retrieve", {**body, "channel": "sms"})
        assert [m["content"] for m in flat.json()["messages"]] == [
            "Joe came round yesterday.",
            "And now by text.",
        ]
        assert flat.json()["metadata"]["hasSummaryContext"] is True
        other = await api.post("/v1/conversations/c1/memory_context", {**body, "user_id": "u-2"})
        assert other.status_code == 404
        bad = await api.post("/v1/conversations/c1/memory_context", {"user_id": "user-1"})
        assert bad.status_code == 400
