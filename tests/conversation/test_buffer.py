"""The ephemeral session buffer."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from confide.conversation.analysis import classify_intent, extract_entities
from confide.conversation.buffer import SessionBuffer
from confide.errors import ConflictError, NotFoundError, ValidationError

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def buffer(clock: Clock) -> SessionBuffer:
    buf = SessionBuffer(clock=clock)
    buf.start("s1", account_id="acct", user_id="u1")
    return buf


def test_start_records_owner_and_time(buffer: SessionBuffer) -> None:
    session = buffer.get("s1")
    assert session is not None
    assert (session.account_id, session.user_id, session.start_time) == ("acct", "u1", T0)
    assert session.turns == () and session.stored_keys == frozenset()


def test_start_is_idempotent_for_same_owner_and_refuses_another(buffer: SessionBuffer) -> None:
    buffer.add_turn("s1", "user", "hello")
    again = buffer.start("s1", account_id="acct", user_id="u1")
    assert len(again.turns) == 1
    with pytest.raises(ConflictError):
        buffer.start("s1", account_id="acct", user_id="u2")


def test_add_turn_needs_open_session_and_valid_speaker(buffer: SessionBuffer) -> None:
    with pytest.raises(NotFoundError):
        buffer.add_turn("missing", "user", "hi")
    with pytest.raises(ValidationError):
        buffer.add_turn("s1", "system", "hi")  # type: ignore[arg-type]


def test_turn_fields(buffer: SessionBuffer, clock: Clock) -> None:
    turn = buffer.add_turn("s1", "user", "My daughter Sarah visits on Tuesday morning.")
    assert turn.timestamp == T0
    assert turn.speaker == "user"
    assert turn.intent == "statement"
    assert turn.entities == ("Sarah", "tuesday", "morning")


def test_summary_is_capped_at_500_chars(buffer: SessionBuffer) -> None:
    turn = buffer.add_turn("s1", "user", "word " * 400)
    assert len(turn.summary) == 500


def test_prunes_to_200_turns(buffer: SessionBuffer) -> None:
    for i in range(250):
        buffer.add_turn("s1", "user", f"turn {i}")
    session = buffer.get("s1")
    assert session is not None
    assert len(session.turns) == 200
    assert session.turns[0].summary == "turn 50"


def test_prunes_turns_older_than_30_minutes_on_add(buffer: SessionBuffer, clock: Clock) -> None:
    buffer.add_turn("s1", "user", "early")
    clock.now = T0 + timedelta(minutes=20)
    buffer.add_turn("s1", "user", "middle")
    clock.now = T0 + timedelta(minutes=31)
    buffer.add_turn("s1", "user", "late")
    session = buffer.get("s1")
    assert session is not None
    assert [t.summary for t in session.turns] == ["middle", "late"]


def test_stored_keys_are_lower_cased(buffer: SessionBuffer) -> None:
    buffer.record_stored_key("s1", "Preferred_Name")
    buffer.record_stored_key("s1", "preferred_name")
    session = buffer.get("s1")
    assert session is not None and session.stored_keys == frozenset({"preferred_name"})


def test_clear_returns_and_deletes(buffer: SessionBuffer) -> None:
    buffer.add_turn("s1", "user", "hello")
    cleared = buffer.clear("s1")
    assert cleared is not None and len(cleared.turns) == 1
    assert buffer.get("s1") is None
    assert buffer.clear("s1") is None
    assert len(buffer) == 0


def test_repr_never_shows_what_was_said(buffer: SessionBuffer) -> None:
    turn = buffer.add_turn("s1", "user", "My secret is Rosebud")
    buffer.record_stored_key("s1", "secret_word")
    session = buffer.get("s1")
    assert "Rosebud" not in repr(turn)
    assert "Rosebud" not in repr(session) and "secret_word" not in repr(session)


def test_snapshots_are_independent_of_later_adds(buffer: SessionBuffer) -> None:
    before = buffer.get("s1")
    buffer.add_turn("s1", "user", "hello")
    assert before is not None and before.turns == ()


def test_concurrent_adds_lose_nothing(clock: Clock) -> None:
    buf = SessionBuffer(max_turns=10_000, clock=clock)
    buf.start("s", account_id="a", user_id="u")

    def worker(n: int) -> None:
        for i in range(250):
            buf.add_turn("s", "user", f"{n}-{i}")
            buf.record_stored_key("s", f"k{n}_{i % 5}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    session = buf.get("s")
    assert session is not None
    assert len(session.turns) == 1000
    assert len(session.stored_keys) == 20


@pytest.mark.parametrize(
    ("text", "speaker", "intent"),
    [
        ("What time is it?", "user", "question"),
        ("Can you remind me tomorrow", "user", "request"),
        ("Please call me Maggie", "user", "request"),
        ("could you speak up", "user", "request"),
        ("Would you tell me a story", "user", "request"),
        ("I went to the market", "user", "statement"),
        ("Would you like a reminder?", "assistant", "response"),
        ("Sure, I can do that.", "assistant", "response"),
    ],
)
def test_intent(text: str, speaker: str, intent: str) -> None:
    assert classify_intent(text, speaker) == intent  # type: ignore[arg-type]


def test_entities_cap_names_at_five_and_dedupe() -> None:
    text = "Anna, Ben, Cara, Dan, Eve and Fay came. Anna said Monday at 3pm, then monday again."
    assert extract_entities(text) == ("Anna", "Ben", "Cara", "Dan", "Eve", "monday", "3pm")


def test_entities_skip_sentence_starters_and_keep_time_phrases() -> None:
    assert extract_entities("I think The doctor said next week. Tomorrow is fine.") == (
        "next week",
        "tomorrow",
    )


def test_sessions_idle_past_the_window_are_evicted_without_a_new_turn(
    buffer: SessionBuffer, clock: Clock
) -> None:
    buffer.start("s2", account_id="acct", user_id="u2")
    clock.now = T0 + timedelta(minutes=20)
    buffer.add_turn("s2", "user", "still here")
    clock.now = T0 + timedelta(minutes=31)
    assert buffer.evict_idle() == 1  # s1 saw nothing for 31 minutes; s2 spoke 11 ago
    assert buffer.session_ids() == ("s2",)
    clock.now = T0 + timedelta(minutes=51)
    assert buffer.evict_idle() == 1
    assert len(buffer) == 0 and buffer.evicted == 2
    assert buffer.evict_idle() == 0
