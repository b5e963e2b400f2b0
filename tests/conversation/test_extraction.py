"""End-of-session extraction: LLM over the scripted server, offline rules, in-memory sink."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from confide.conversation.buffer import Session, SessionBuffer
from confide.conversation.extraction import (
    ExtractionPipeline,
    LLMExtractor,
    ProposedChange,
    parse_candidates,
    render_transcript,
)
from confide.errors import ProviderError
from confide.llm import OpenAICompatibleLLM
from confide.llm.offline import OfflineExtractor
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply
from confide.types import MemoryType, NewMemory, Source

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


class InMemorySink:
    """A memory sink and proposal sink kept in dictionaries."""

    def __init__(self, existing: dict[str, str] | None = None) -> None:
        self.existing = dict(existing or {})
        self.created: list[NewMemory] = []
        self.proposals: list[ProposedChange] = []

    async def existing_keys(self, *, account_id: str, user_id: str) -> set[str]:
        return set(self.existing)

    async def current_value(self, *, account_id: str, user_id: str, key: str) -> str | None:
        return next((v for k, v in self.existing.items() if k.lower() == key.lower()), None)

    async def create(self, memory: NewMemory) -> None:
        self.created.append(memory)

    async def propose(self, change: ProposedChange) -> None:
        self.proposals.append(change)

    @property
    def created_keys(self) -> dict[str, str]:
        return {m.key: m.value for m in self.created}


def session_of(*turns: tuple[str, str], stored: tuple[str, ...] = ()) -> Session:
    buf = SessionBuffer(clock=lambda: T0)
    buf.start("s1", account_id="acct", user_id="u1")
    for speaker, text in turns:
        buf.add_turn("s1", speaker, text)  # type: ignore[arg-type]
    for key in stored:
        buf.record_stored_key("s1", key)
    snapshot = buf.clear("s1")
    assert snapshot is not None
    return snapshot


def answer(*items: dict[str, object]) -> str:
    return json.dumps(list(items))


def mem(t: str, key: str, value: str, confidence: float = 0.9) -> dict[str, object]:
    return {"type": t, "key": key, "value": value, "confidence": confidence}


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


def llm_pipeline(server: ScriptedLLMServer, sink: InMemorySink) -> ExtractionPipeline:
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
    extractor = LLMExtractor(llm)
    return ExtractionPipeline(extractor, sink, proposals=sink, writing=extractor.writing)


def run(pipeline: ExtractionPipeline, session: Session):  # type: ignore[no-untyped-def]
    return asyncio.run(pipeline.run(session))


CHAT = (
    ("user", "My dog Biscuit has been unwell."),
    ("assistant", "I'm sorry to hear that. How is your knee, by the way?"),
    ("user", "Better. My granddaughter Emma visits on Sunday."),
)


def test_llm_request_shape(server: ScriptedLLMServer) -> None:
    server.enqueue("[]")
    sink = InMemorySink({"City": "Portland"})
    run(llm_pipeline(server, sink), session_of(*CHAT, stored=("pet_dog_name",)))
    (request,) = server.requests
    assert request.json["temperature"] == 0.3
    system, user = request.messages
    assert system["role"] == "system" and "JSON array" in system["content"]
    assert "city, pet_dog_name" in system["content"]
    assert user["content"].splitlines() == [
        "[USER] My dog Biscuit has been unwell.",
        "[ASSISTANT] I'm sorry to hear that. How is your knee, by the way?",
        "[USER] Better. My granddaughter Emma visits on Sunday.",
    ]


def test_stores_new_grounded_memories(server: ScriptedLLMServer) -> None:
    server.enqueue(
        answer(
            mem("fact", "pet_dog_name", "Biscuit (dog)"),
            mem("follow_up", "Visit Granddaughter", "Emma visits on Sunday"),
        )
    )
    sink = InMemorySink()
    report = run(llm_pipeline(server, sink), session_of(*CHAT))
    # A free-text key goes to its vocabulary family; its words missing from the value move there.
    assert sink.created_keys == {
        "pet_dog_name": "Biscuit (dog)",
        "visit": "granddaughter: Emma visits on Sunday",
    }
    created = sink.created[0]
    assert (created.account_id, created.user_id, created.source) == (
        "acct",
        "u1",
        Source.EXTRACTION,
    )
    assert created.confidence == 0.9 and created.metadata == {"session_id": "s1"}
    assert (report.turns_processed, report.extracted, report.stored) == (3, 2, 2)


def test_skips_existing_and_session_keys_case_insensitively(server: ScriptedLLMServer) -> None:
    server.enqueue(
        answer(
            mem("fact", "PET_DOG_NAME", "Biscuit"),
            mem("follow_up", "visit_granddaughter", "Emma visits on Sunday"),
            mem("fact", "granddaughter_name", "Emma"),
        )
    )
    # Single-valued keys are skipped when stored; a family key is numbered past stored ones.
    sink = InMemorySink({"Granddaughter_Name": "Emma", "Visit": "Emma on Saturday"})
    report = run(llm_pipeline(server, sink), session_of(*CHAT, stored=("Pet_Dog_Name",)))
    assert sink.created_keys == {"visit.2": "granddaughter: Emma visits on Sunday"}
    assert report.skipped_existing == 2


def test_drops_memories_only_the_assistant_said(server: ScriptedLLMServer) -> None:
    chat = (
        ("assistant", "Last time you told me your sister Margaret moved to Florida."),
        ("user", "Oh yes. I'm making soup today."),
    )
    server.enqueue(
        answer(
            mem("fact", "sister_name", "Margaret, who moved to Florida"),
            mem("context", "today_activity", "making soup today"),
        )
    )
    sink = InMemorySink()
    report = run(llm_pipeline(server, sink), session_of(*chat))
    assert sink.created_keys == {"note": "today activity: making soup today"}
    assert report.dropped_ungrounded == 1


def test_validator_trims_and_rejects(server: ScriptedLLMServer) -> None:
    long_sentence = "Biscuit " + "dog " * 80
    server.enqueue(
        answer(
            mem("fact", "pet_dog_name", "Biscuit is a dog. Biscuit is unwell. Biscuit is old."),
            mem("fact", "empty", "   "),
            mem("fact", "too_long", long_sentence),
            mem("nonsense", "bad_type", "Biscuit"),
            mem("episodic", "not_extractable", "Biscuit"),
            mem("fact", "!!!", "Biscuit"),
        )
    )
    sink = InMemorySink()
    report = run(llm_pipeline(server, sink), session_of(*CHAT))
    assert sink.created_keys == {"pet_dog_name": "Biscuit is a dog. Biscuit is unwell."}
    assert report.rejected_invalid == 4  # empty, too long, episodic, unusable key


def test_sensitive_key_change_becomes_a_proposal(server: ScriptedLLMServer) -> None:
    chat = (("user", "I moved to Tucson last month, and please call me Maggie now."),)
    server.enqueue(
        answer(
            mem("fact", "city", "Tucson"),
            mem("preference", "preferred_name", "Maggie"),
            mem("fact", "name", "Maggie"),
        )
    )
    sink = InMemorySink({"city": "Portland", "preferred_name": "maggie", "name": "Margaret"})
    report = run(llm_pipeline(server, sink), session_of(*chat))
    assert sink.created == []
    (proposal,) = sink.proposals
    assert (proposal.key, proposal.current_value, proposal.proposed_value) == (
        "city",
        "Portland",
        "Tucson",
    )
    assert proposal.session_id == "s1" and proposal.type is MemoryType.FACT
    assert (report.proposed, report.skipped_existing) == (1, 2)
    assert "Tucson" not in repr(proposal)


def test_a_first_sensitive_key_is_held_too(server: ScriptedLLMServer) -> None:
    server.enqueue(answer(mem("fact", "city", "Tucson")))
    sink = InMemorySink()
    report = run(llm_pipeline(server, sink), session_of(("user", "I live in Tucson.")))
    assert sink.created_keys == {}
    (proposal,) = sink.proposals
    assert (proposal.key, proposal.current_value, proposal.proposed_value) == (
        "city",
        None,
        "Tucson",
    )
    assert report.proposed == 1


def test_a_benign_memory_needs_two_signals(server: ScriptedLLMServer) -> None:
    # Heard (grounded) and confident (0.9): created. Heard only (0.4): held as a proposal.
    # Heard in two turns (repeated), however unsure: created.
    server.enqueue(
        answer(
            mem("fact", "pet_dog_name", "Biscuit"),
            mem("fact", "occupation", "baker", confidence=0.4),
            mem("preference", "likes", "gardening", confidence=0.4),
        )
    )
    sink = InMemorySink()
    chat = (
        ("user", "My dog Biscuit loves the garden. I was a baker."),
        ("user", "Gardening keeps me busy."),
        ("user", "I do love gardening."),
    )
    report = run(llm_pipeline(server, sink), session_of(*chat))
    assert sink.created_keys == {"pet_dog_name": "Biscuit", "likes": "gardening"}
    assert [(p.key, p.current_value, p.proposed_value) for p in sink.proposals] == [
        ("occupation", None, "baker")
    ]
    assert report.proposed == 1
    without = ExtractionPipeline(LLMExtractor(OpenAICompatibleLLM(
        base_url=server.base_url, model="scripted")), InMemorySink())  # fmt: skip
    server.enqueue(answer(mem("fact", "occupation", "baker", confidence=0.4)))
    dropped = run(without, session_of(*chat))
    assert (dropped.stored, dropped.proposed, dropped.uncorroborated) == (0, 0, 1)


@pytest.mark.parametrize(
    "reply",
    [
        ScriptedReply(status=500, body=b"oops"),
        ScriptedReply(body=b"not json"),
        ScriptedReply(content="I could not find anything, sorry."),
        ScriptedReply(drop=True),
    ],
)
def test_provider_failures_store_nothing_and_do_not_raise(
    server: ScriptedLLMServer, reply: ScriptedReply
) -> None:
    server.enqueue(reply)
    sink = InMemorySink()
    report = run(llm_pipeline(server, sink), session_of(*CHAT))
    assert sink.created == [] and report.error == "provider"


def test_timeout_is_handled(server: ScriptedLLMServer) -> None:
    server.enqueue(ScriptedReply(content="[]", delay=30))
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="scripted")
    pipeline = ExtractionPipeline(LLMExtractor(llm, timeout=0.2), InMemorySink())
    assert run(pipeline, session_of(*CHAT)).error == "provider"
    assert len(server.requests) == 1  # no retry


def test_no_user_turns_means_no_call(server: ScriptedLLMServer) -> None:
    report = run(llm_pipeline(server, InMemorySink()), session_of(("assistant", "Hello!")))
    assert server.requests == [] and report.turns_processed == 1


def test_logs_counts_never_values_or_transcript(
    server: ScriptedLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(answer(mem("fact", "pet_dog_name", "Biscuit")))
    caplog.set_level(logging.DEBUG)
    run(llm_pipeline(server, InMemorySink()), session_of(*CHAT))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "turns=3 extracted=1 stored=1" in text
    for secret in ("Biscuit", "Emma", "knee", "pet_dog_name"):
        assert secret not in text


def test_offline_extractor_through_the_pipeline() -> None:
    chat = (
        ("user", "My daughter Sarah is visiting this weekend."),
        ("assistant", "Lovely! Your cat Whiskers will be pleased."),
        ("user", "I've been feeling lonely lately."),
    )
    sink = InMemorySink({"mood": "fine"})
    pipeline = ExtractionPipeline(OfflineExtractor(), sink, proposals=sink)
    report = run(pipeline, session_of(*chat))
    assert set(sink.created_keys) == {"daughter_name", "visit"}
    assert report.error is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[{"type": "fact", "key": "k", "value": "v"}]', [("k", "v", 0.7)]),
        ('```json\n[{"type": "fact", "key": "k", "value": "v", "confidence": 2}]\n```',
         [("k", "v", 1.0)]),
        ('Sure! Here you go:\n[{"type": "FACT", "key": "k", "value": "v"}]\nHope it helps.',
         [("k", "v", 0.7)]),
        ('{"memories": [{"type": "fact", "key": "k", "value": "v", "confidence": 0.2}]}',
         [("k", "v", 0.2)]),
        ('[1, "x", {"type": "fact"}, {"type": "fact", "key": "k", "value": 3}]', []),
        ("[]", []),
    ],
)  # fmt: skip
def test_parse_candidates(text: str, expected: list[tuple[str, str, float]]) -> None:
    assert [(c.key, c.value, c.confidence) for c in parse_candidates(text)] == expected


def test_parse_candidates_refuses_answers_without_array() -> None:
    with pytest.raises(ProviderError):
        parse_candidates("no json here [ at all")


def test_render_transcript() -> None:
    session = session_of(("user", "Hi"), ("assistant", "Hello"))
    assert render_transcript(session.turns) == "[USER] Hi\n[ASSISTANT] Hello"
