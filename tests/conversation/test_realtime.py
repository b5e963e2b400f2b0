"""The Realtime adapter, driven with the protocol's JSON events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from confide.conversation.buffer import Session, SessionBuffer
from confide.conversation.realtime import RealtimeAdapter
from confide.errors import NotFoundError, StorageError
from confide.types import Memory, MemoryState, MemoryType, Source, Visibility

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def memory(key: str, value: str, memory_type: MemoryType = MemoryType.FACT) -> Memory:
    return Memory(
        id=f"m-{key}", account_id="acct", user_id="u1", type=memory_type, key=key, value=value,
        confidence=1.0, importance=2, source=Source.TOOL, visibility=Visibility.PRIVATE,
        pinned=False, state=MemoryState.ACTIVE, version=1, lineage_id=f"l-{key}",
        created_at=T0, updated_at=T0,
    )  # fmt: skip


class RecordingDispatcher:
    """Stores into a list that the loader reads back; fails on request."""

    def __init__(self, store: list[Memory]) -> None:
        self.store = store
        self.calls: list[tuple[str, dict[str, Any], Session]] = []

    async def dispatch(self, name: str, arguments_json: str, session: Session) -> dict[str, Any]:
        args = json.loads(arguments_json)
        self.calls.append((name, args, session))
        if name == "forget_memory":
            raise NotFoundError("no memory with that key")
        if name == "explode":
            raise RuntimeError("boom")
        if name == "store_memory":
            self.store.append(memory(args["key"], args["value"], MemoryType(args["memory_type"])))
            return {"ok": True, "action": "stored"}
        if name == "update_memory":
            return {"error": "refused"} if args["existing_key"] == "locked" else {"ok": True}
        return {"ok": True}


class ListLoader:
    def __init__(self, store: list[Memory], *, fail: bool = False) -> None:
        self.store = store
        self.fail = fail

    async def load(
        self, *, account_id: str, user_id: str, categories: Sequence[str] | None = None
    ) -> Sequence[Memory]:
        if self.fail:
            raise StorageError("database unavailable")
        return [m for m in self.store if categories is None or m.category in categories]


class Harness:
    def __init__(self, *, fail_refresh: bool = False) -> None:
        self.store: list[Memory] = [memory("city", "Portland")]
        self.buffer = SessionBuffer(clock=lambda: T0)
        self.buffer.start("s1", account_id="acct", user_id="u1")
        self.dispatcher = RecordingDispatcher(self.store)
        self.adapter = RealtimeAdapter(
            buffer=self.buffer,
            session_id="s1",
            dispatcher=self.dispatcher,
            memories=ListLoader(self.store, fail=fail_refresh),
            instructions="You are Ava, a friendly companion.",
        )

    def send(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        texts = asyncio.run(self.adapter.handle_json(json.dumps(event)))
        return [json.loads(t) for t in texts]

    def turns(self) -> list[tuple[str, str]]:
        session = self.buffer.get("s1")
        assert session is not None
        return [(t.speaker, t.summary) for t in session.turns]


def transcription(text: str) -> dict[str, Any]:
    return {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "ev1", "item_id": "item1", "content_index": 0, "transcript": text,
    }  # fmt: skip


def response_done(*output: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.done", "event_id": "ev2",
            "response": {"id": "resp1", "status": "completed", "output": list(output)}}  # fmt: skip


def audio_message(transcript: str) -> dict[str, Any]:
    return {"id": "msg1", "type": "message", "role": "assistant",
            "content": [{"type": "audio", "transcript": transcript}]}  # fmt: skip


def call(name: str | None, args: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    event = {"type": "response.function_call_arguments.done", "event_id": "ev3",
             "response_id": "resp1", "item_id": "fc1", "output_index": 0,
             "call_id": call_id, "arguments": json.dumps(args)}  # fmt: skip
    if name is not None:
        event["name"] = name
    return event


def test_user_and_assistant_turns() -> None:
    h = Harness()
    assert h.send(transcription("My daughter Sarah visits on Sunday.")) == []
    function_item = {
        "type": "function_call",
        "name": "store_memory",
        "call_id": "c",
        "arguments": "{}",
    }
    assert (
        h.send(response_done(function_item, audio_message("How lovely! Tell me about her."))) == []
    )
    assert h.turns() == [
        ("user", "My daughter Sarah visits on Sunday."),
        ("assistant", "How lovely! Tell me about her."),
    ]


def test_output_audio_and_text_parts_are_read() -> None:
    h = Harness()
    h.send(
        response_done(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_audio", "transcript": "Hi there"}],
            }
        )
    )
    h.send(
        response_done(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Written"}],
            }
        )
    )
    h.send(response_done())  # nothing spoken: no turn
    assert h.turns() == [("assistant", "Hi there"), ("assistant", "Written")]  # fmt: skip


def test_store_call_answers_refreshes_and_records_key() -> None:
    h = Harness()
    args = {"memory_type": "fact", "key": "Daughter_Name", "value": "Sarah"}
    out = h.send(call("store_memory", args))
    assert [e["type"] for e in out] == [
        "conversation.item.create",
        "session.update",
        "response.create",
    ]
    item = out[0]["item"]
    assert item["type"] == "function_call_output" and item["call_id"] == "call_1"
    assert json.loads(item["output"]) == {"ok": True, "action": "stored"}
    instructions = out[1]["session"]["instructions"]
    assert instructions.startswith("You are Ava")
    assert "## Memory management" in instructions
    assert "- Daughter_Name: Sarah" in instructions and "- city: Portland" in instructions
    session = h.buffer.get("s1")
    assert session is not None and session.stored_keys == frozenset({"daughter_name"})
    name, passed_args, passed_session = h.dispatcher.calls[0]
    assert (name, passed_args, passed_session.session_id) == ("store_memory", args, "s1")


def test_update_records_existing_key() -> None:
    h = Harness()
    out = h.send(call("update_memory", {"existing_key": "City", "new_value": "Tucson"}))
    assert [e["type"] for e in out] == [
        "conversation.item.create",
        "session.update",
        "response.create",
    ]
    session = h.buffer.get("s1")
    assert session is not None and session.stored_keys == frozenset({"city"})


def test_failed_store_does_not_refresh_or_record() -> None:
    h = Harness()
    out = h.send(call("update_memory", {"existing_key": "locked", "new_value": "x"}))
    assert [e["type"] for e in out] == ["conversation.item.create", "response.create"]
    session = h.buffer.get("s1")
    assert session is not None and session.stored_keys == frozenset()


def test_other_tools_do_not_refresh() -> None:
    h = Harness()
    out = h.send(call("memory_query", {"query": "family"}))
    assert [e["type"] for e in out] == ["conversation.item.create", "response.create"]


def test_dispatcher_errors_become_error_outputs(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    caplog.set_level(logging.DEBUG)
    out = h.send(call("forget_memory", {"key": "secret_thing"}))
    # The answer every door gives: the class and the message.
    assert json.loads(out[0]["item"]["output"]) == {
        "success": False,
        "error": "no memory with that key",
        "type": "NotFoundError",
    }
    out = h.send(call("explode", {"key": "secret_thing"}, call_id="call_2"))
    assert json.loads(out[0]["item"]["output"]) == {"error": "internal error"}
    assert out[-1] == {"type": "response.create"}
    assert "secret_thing" not in caplog.text


def test_failed_refresh_is_logged_and_the_call_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(fail_refresh=True)
    out = h.send(call("store_memory", {"memory_type": "fact", "key": "k", "value": "Secret"}))
    assert [e["type"] for e in out] == ["conversation.item.create", "response.create"]
    assert "refresh failed" in caplog.text and "Secret" not in caplog.text


def test_name_from_output_item_added_and_duplicate_calls_ignored() -> None:
    h = Harness()
    h.send({"type": "response.output_item.added", "response_id": "resp1", "output_index": 0,
            "item": {"id": "fc1", "type": "function_call", "name": "store_memory",
                     "call_id": "call_9", "arguments": ""}})  # fmt: skip
    args = {"memory_type": "preference", "key": "likes_tea", "value": "tea"}
    assert len(h.send(call(None, args, call_id="call_9"))) == 3
    assert h.send(call(None, args, call_id="call_9")) == []
    assert [c[0] for c in h.dispatcher.calls] == ["store_memory"]


def test_initial_session_update_carries_tools() -> None:
    h = Harness()
    event = asyncio.run(h.adapter.session_update())
    assert event["type"] == "session.update"
    assert {t["name"] for t in event["session"]["tools"]} >= {"store_memory", "memory_query"}
    assert all(t["type"] == "function" for t in event["session"]["tools"])


def test_junk_and_unknown_events_are_ignored() -> None:
    h = Harness()
    assert asyncio.run(h.adapter.handle_json("not json")) == []
    assert asyncio.run(h.adapter.handle_json("[1]")) == []
    assert h.send({"type": "input_audio_buffer.speech_started"}) == []
    assert h.send(transcription("   ")) == []
    assert h.turns() == []


def test_turns_after_session_closed_are_dropped_quietly() -> None:
    h = Harness()
    h.buffer.clear("s1")
    assert h.send(transcription("hello")) == []
