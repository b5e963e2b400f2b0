"""Rolling summaries on both backends: when they run, what they store, and that every
failure stores nothing and leaves the range for the next trigger.

The LLM is the scripted OpenAI-compatible server over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from confide.chat import ChatMemory, FactCategory
from confide.chat.facts import FACT_MEMORY_CATEGORY
from confide.chat.history import CHUNK_CATEGORY
from confide.chat.summaries import ACTOR as SUMMARY_ACTOR
from confide.chat.summaries import SUMMARY_PROMPT, LLMSummariser, OfflineSummariser
from confide.chat.types import ChatMessage
from confide.conversation.writing import Outcome, check_episodic, check_semantic
from confide.embedders.openai import OpenAICompatibleEmbedder
from confide.engine import MemoryEngine
from confide.errors import ProviderError, StorageError
from confide.index.vectors import VectorIndexer
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.storage.chat import SqlMessageTables
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.types import HistoryEventType, MemoryFilter, MemoryType, Visibility

ACCOUNT = "acct-1"
GOOD = json.dumps(
    {
        "summary": "Ann talked about her garden. She grows roses.",
        "facts": [
            {"category": "hobby", "content": "Ann grows roses in her garden"},
            {"category": "relationship", "content": "Ann's son is called Tom"},
        ],
    }
)


def _fill(chat: ChatMemory, count: int, *, start: int = 0, subject: str | None = "ann") -> None:
    for i in range(start, start + count):
        chat.add_message(
            {
                "account_id": ACCOUNT,
                "user_id": "user-1",
                "conversation_id": "c1",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"line {i} of the chat",
                "subject_id": subject,
            }
        )


def _run(chat: ChatMemory) -> Any:
    return asyncio.run(chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"))


def _state(engine: MemoryEngine) -> dict[str, Any]:
    """What a summary writes: chunks, facts, range records, and the unsummarised count."""
    flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
    memories = engine.list_memories(flt, limit=1000)
    tables = SqlMessageTables(engine.storage)
    return {
        "chunks": [m for m in memories if m.category == CHUNK_CATEGORY],
        "facts": [m for m in memories if m.category == FACT_MEMORY_CATEGORY],
        "ranges": [(s.range_start, s.range_end) for s in tables.summaries(ACCOUNT, "c1")],
        "unsummarised": len(tables.unsummarised(ACCOUNT, "c1")),
    }


def _llm_chat(engine: MemoryEngine, server: ScriptedLLMServer, **kw: Any) -> ChatMemory:
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
    return ChatMemory(engine, summariser=LLMSummariser(llm, **kw))


def test_trigger_arithmetic_30_then_20(engine: MemoryEngine) -> None:
    chat = ChatMemory(engine, summariser=OfflineSummariser())
    _fill(chat, 30)
    assert _run(chat) is None
    assert _state(engine)["ranges"] == []
    _fill(chat, 1, start=30)
    outcome = _run(chat)
    assert (outcome.range_start, outcome.range_end) == (0, 20)
    assert _run(chat) is None  # 11 left unsummarised
    _fill(chat, 19, start=31)  # 30 unsummarised: not more than 30
    assert _run(chat) is None
    _fill(chat, 1, start=50)
    assert _run(chat) is not None
    state = _state(engine)
    assert state["ranges"] == [(0, 20), (20, 40)]
    assert state["unsummarised"] == 11
    assert len(state["chunks"]) == 2


def test_llm_summary_becomes_a_chunk_and_private_facts(engine: MemoryEngine) -> None:
    with ScriptedLLMServer([GOOD]) as server:
        chat = _llm_chat(engine, server)
        _fill(chat, 31)
        outcome = _run(chat)
        [request] = server.requests
    assert request.messages[0] == {"role": "system", "content": SUMMARY_PROMPT}
    transcript = request.messages[1]["content"].split("\n")
    assert transcript[0] == "user: line 0 of the chat" and len(transcript) == 20
    state = _state(engine)
    [chunk] = state["chunks"]
    assert chunk.id == outcome.chunk_id
    assert chunk.value == "Ann talked about her garden. She grows roses."
    assert chunk.type == MemoryType.EPISODIC and chunk.subject_id == "ann"
    assert chunk.metadata == {"conversation_id": "c1", "range_start": 0, "range_end": 20}
    assert sorted(f.value for f in state["facts"]) == [
        "Ann grows roses in her garden",
        "Ann's son is called Tom",
    ]
    assert all(f.visibility == Visibility.PRIVATE for f in state["facts"])
    assert all(f.subject_id == "ann" for f in state["facts"])
    facts = chat.subject_facts(account_id=ACCOUNT, user_id="user-1", subject_id="ann")
    assert [f.category for f in facts] == [FactCategory.HOBBY, FactCategory.RELATIONSHIP]
    assert state["unsummarised"] == 11 and state["ranges"] == [(0, 20)]


def test_a_restated_fact_supersedes_and_a_repeated_one_is_kept_once(
    engine: MemoryEngine,
) -> None:
    second = json.dumps(
        {
            "summary": "Ann said more about the garden.",
            "facts": [
                {"category": "hobby", "content": "Ann grows roses in her garden"},
                {"category": "relationship", "content": "Ann's son is called Thomas"},
            ],
        }
    )
    with ScriptedLLMServer([GOOD, second]) as server:
        chat = _llm_chat(engine, server)
        _fill(chat, 31)
        _run(chat)
        _fill(chat, 20, start=31)
        _run(chat)
    facts = _state(engine)["facts"]
    assert sorted(f.value for f in facts) == [
        "Ann grows roses in her garden",
        "Ann's son is called Thomas",
    ]
    son = next(f for f in facts if "Thomas" in f.value)
    assert son.version == 2
    versions = engine.versions(son.id, account_id=ACCOUNT)
    assert [v.value for v in versions] == ["Ann's son is called Tom", "Ann's son is called Thomas"]
    # Every write of a summary names who made it, the first version's as much as the restated.
    assert [(e.event, e.actor) for e in engine.history(son.id, account_id=ACCOUNT)] == [
        (HistoryEventType.UPDATE, SUMMARY_ACTOR),
        (HistoryEventType.ADD, SUMMARY_ACTOR),
    ]
    [chunk, _] = _state(engine)["chunks"]
    assert [e.actor for e in engine.history(chunk.id, account_id=ACCOUNT)] == [SUMMARY_ACTOR]


def _assert_nothing_stored(engine: MemoryEngine) -> None:
    state = _state(engine)
    assert state["chunks"] == [] and state["facts"] == [] and state["ranges"] == []
    assert state["unsummarised"] == 31


@pytest.mark.parametrize(
    "reply",
    [
        ScriptedReply(content="this is not JSON"),
        ScriptedReply(content='{"summary": "fine", "facts": "not a list"}'),
        ScriptedReply(content='["a", "list"]'),
        ScriptedReply(status=503, body=b'{"error": "overloaded"}'),
    ],
    ids=["prose", "facts-not-a-list", "not-an-object", "http-503"],
)
def test_a_bad_answer_stores_nothing_and_the_range_is_retried(
    engine: MemoryEngine, reply: ScriptedReply
) -> None:
    with ScriptedLLMServer([reply, GOOD]) as server:
        chat = _llm_chat(engine, server)
        _fill(chat, 31)
        with pytest.raises(ProviderError):
            _run(chat)
        _assert_nothing_stored(engine)
        assert _run(chat) is not None  # the next trigger
    assert _state(engine)["ranges"] == [(0, 20)]


def test_an_llm_timeout_stores_nothing(engine: MemoryEngine) -> None:
    with ScriptedLLMServer([ScriptedReply(content=GOOD, delay=30), GOOD]) as server:
        chat = _llm_chat(engine, server, timeout=0.3)
        _fill(chat, 31)
        with pytest.raises(ProviderError, match="timed out"):
            _run(chat)
        _assert_nothing_stored(engine)
        # The retry is not about time: with the default timeout, a loaded machine's slow
        # reply is not a second timeout.
        assert _run(_llm_chat(engine, server)) is not None
    assert _state(engine)["ranges"] == [(0, 20)]


def test_an_embedder_error_stores_nothing(engine: MemoryEngine) -> None:
    with ScriptedLLMServer([GOOD]) as server:
        chat = _llm_chat(engine, server)
        _fill(chat, 31)
        # Vectors from an endpoint with no /embeddings: every embedding fails.
        with OpenAICompatibleEmbedder(model="absent", base_url=server.base_url, dims=8) as broken:
            engine.add_indexer(VectorIndexer(engine.storage, broken, link_top_k=0))
            with pytest.raises(ProviderError):
                _run(chat)
    _assert_nothing_stored(engine)


def _rename(engine: MemoryEngine, old: str, new: str) -> None:
    with engine.storage.transaction() as tx:
        sql: Any = tx
        sql.run(f"ALTER TABLE {old} RENAME TO {new}")


def test_a_database_failure_mid_commit_stores_nothing(engine: MemoryEngine) -> None:
    with ScriptedLLMServer([GOOD, GOOD]) as server:
        chat = _llm_chat(engine, server)
        _fill(chat, 31)
        # The range record is the last write of the transaction: chunk and facts are
        # already inserted when it fails.
        _rename(engine, "conversation_summaries", "summaries_elsewhere")
        try:
            with pytest.raises(StorageError):
                _run(chat)
        finally:
            _rename(engine, "summaries_elsewhere", "conversation_summaries")
        _assert_nothing_stored(engine)
        assert _run(chat) is not None
    assert _state(engine)["ranges"] == [(0, 20)]


def test_two_concurrent_triggers_store_the_range_once(engine: MemoryEngine) -> None:
    both_asked = threading.Barrier(2, timeout=20)

    def answer(request: RecordedRequest) -> ScriptedReply:
        both_asked.wait()  # neither answer leaves before both triggers asked
        return ScriptedReply(content=GOOD)

    with ScriptedLLMServer(responder=answer) as server:
        chat = _llm_chat(engine, server)
        _fill(chat, 31)

        async def both() -> list[Any]:
            return list(
                await asyncio.gather(
                    chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"),
                    chat.summarise_if_due(account_id=ACCOUNT, conversation_id="c1"),
                )
            )

        outcomes = asyncio.run(both())
        assert len(server.requests) == 2
    assert sum(o is not None for o in outcomes) == 1
    state = _state(engine)
    assert state["ranges"] == [(0, 20)]
    assert len(state["chunks"]) == 1 and len(state["facts"]) == 2


def test_the_offline_summariser_is_deterministic_and_finds_facts(engine: MemoryEngine) -> None:
    lines = [
        "I love gardening with my neighbour.",
        "Lovely, tell me more.",
        "My dog is called Biscuit.",
        "What a good name.",
        "I work as a nurse at the city hospital.",
    ]
    chat = ChatMemory(engine)  # no LLM configured: offline
    assert isinstance(chat.summaries.summariser, OfflineSummariser)
    for i in range(31):
        chat.add_message(
            {
                "account_id": ACCOUNT,
                "user_id": "user-1",
                "conversation_id": "c1",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": lines[i] if i < len(lines) else f"small talk number {i}",
                "subject_id": "ann",
            }
        )
    _run(chat)
    state = _state(engine)
    [chunk] = state["chunks"]
    # The user's words, retold in the third person: a summary as a model must write one.
    assert "The user's dog is called Biscuit." in chunk.value
    assert "The user works as a nurse at the city hospital." in chunk.value
    assert 2 <= chunk.value.count(".") <= 4
    assert check_episodic(chunk.value).outcome is Outcome.ACCEPTED
    facts = chat.subject_facts(account_id=ACCOUNT, user_id="user-1", subject_id="ann")
    assert {(f.category, f.content) for f in facts} >= {
        (FactCategory.RELATIONSHIP, "The user's dog is called Biscuit."),
        (FactCategory.OCCUPATION, "The user works as a nurse at the city hospital."),
    }
    assert all(check_semantic(f.content).outcome is Outcome.ACCEPTED for f in facts)
    opened = chat.messages.open(
        SqlMessageTables(engine.storage).messages(ACCOUNT, "c1", after=-1, limit=20)
    )
    again = asyncio.run(OfflineSummariser().summarise(opened))
    assert again.summary == chunk.value


def test_offline_facts_keep_what_the_rules_have_no_pattern_for() -> None:
    """A statement the user makes about themselves is a fact even without a rule for it;
    questions, hypotheticals and sentences about nobody in particular are not."""
    lines = [
        ("user", "I keep bees on my allotment."),
        ("user", "Do you think it will rain tomorrow?"),
        ("user", "If I had a boat I would sail to Norway."),
        ("user", "The weather was grey this morning."),
        ("assistant", "I love hearing about your garden."),
        ("user", "My dog is called Biscuit."),
    ]
    when = datetime.now(UTC)
    messages = [
        ChatMessage(id=f"m{i}", index=i, role=role, content=text, timestamp=when)
        for i, (role, text) in enumerate(lines)
    ]
    summary = asyncio.run(OfflineSummariser().summarise(messages))
    assert {(f.category, f.content) for f in summary.facts} == {
        (FactCategory.OTHER, "The user keeps bees on their allotment."),
        (FactCategory.RELATIONSHIP, "The user's dog is called Biscuit."),
    }
