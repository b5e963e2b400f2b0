"""Done-when: a whole voice session through the Realtime adapter, on both backends.

Events go in and come out; a name the user says in the call is stored and corrected at once
(consent given in the conversation) and the refreshed instructions show it; the session ends
over HTTP and the scripted LLM's extraction is stored with the duplicates skipped, the
sensitive key it inferred held for the user, who rejects it; and the conversation leaves no
trace on disk or in the logs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from confide.config import Settings
from confide.conversation.extraction import LLMExtractor
from confide.engine import MemoryEngine
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.server import create_app
from confide.storage.base import Capability, Storage
from confide.testing.scripted_llm import ScriptedLLMServer

SENTINEL = "Quixotic7731Pumpernickel"
ACCOUNT = "acct-voice"
LINE = "line-42"

EXTRACTED = json.dumps(
    [
        {"type": "fact", "key": "daughter_name", "value": "Sarah", "confidence": 0.9},
        {"type": "preference", "key": "likes_gardening", "value": "gardening"},
        {"type": "preference", "key": "preferred_name", "value": "Margaret"},
        {"type": "fact", "key": "city", "value": "Denver", "confidence": 0.8},
    ]
)


def transcript(text: str) -> dict[str, Any]:
    return {"type": "conversation.item.input_audio_transcription.completed", "transcript": text}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "response.output_item.added",
            "item": {"type": "function_call", "call_id": call_id, "name": name},
        },
        {
            "type": "response.function_call_arguments.done",
            "call_id": call_id,
            "arguments": json.dumps(arguments),
        },
    ]


def reply(text: str) -> dict[str, Any]:
    return {
        "type": "response.done",
        "response": {
            "output": [
                {"type": "message", "content": [{"type": "output_audio", "transcript": text}]}
            ]
        },
    }


def instructions_of(events: list[dict[str, Any]]) -> str:
    updates = [e for e in events if e["type"] == "session.update"]
    assert len(updates) == 1
    return str(updates[0]["session"]["instructions"])


def everything_on_disk(root: Path, storage: Storage) -> bytes:
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    if Capability.DATA_FILES in storage.capabilities:  # a server's files, outside ``root``
        files += storage.data_files(shared=False)  # (other tests' databases share its WAL)
    return b"".join(p.read_bytes() for p in files if p.exists())


@pytest.mark.asyncio
async def test_a_voice_session_end_to_end(
    engine: MemoryEngine,
    storage: Storage,
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with ScriptedLLMServer([EXTRACTED]) as llm_server:
        llm = OpenAICompatibleLLM(base_url=llm_server.base_url, model="scripted")
        app = create_app(
            settings.model_copy(update={"min_session_seconds": 0.0}),
            engine=engine,
            extractor=LLMExtractor(llm),
        )
        services = app.state.services
        token = services.keys.create(ACCOUNT)
        auth = {"Authorization": f"Bearer {token}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as http:
            created = await http.post(
                "/sessions", json={"accountId": ACCOUNT, "lineId": LINE}, headers=auth
            )
            sid = created.json()["callSessionId"]
            await http.post(f"/sessions/{sid}/connected", headers=auth)

            adapter = services.adapter(sid)
            opening = await adapter.session_update()
            assert {t["name"] for t in opening["session"]["tools"]} >= {"store_memory"}

            assert await adapter.handle(transcript("Please call me Maggie.")) == []
            await adapter.handle(tool_call("c1", "store_memory", {})[0])
            out = await adapter.handle(
                tool_call(
                    "c1",
                    "store_memory",
                    {"memory_type": "preference", "key": "preferred_name", "value": "Maggie"},
                )[1]
            )
            assert [e["type"] for e in out] == [
                "conversation.item.create",
                "session.update",
                "response.create",
            ]
            # A sensitive key the user said in the call: stored at once, in the instructions.
            named = json.loads(out[0]["item"]["output"])
            assert named["success"] is True and named["action"] == "created"
            assert "Maggie" in instructions_of(out)
            await adapter.handle(reply("Lovely to meet you, Maggie."))

            await adapter.handle(transcript("Actually, I prefer Margaret."))
            out = []
            for event in tool_call(
                "c2", "update_memory", {"existing_key": "Preferred_Name", "new_value": "Margaret"}
            ):
                out += await adapter.handle(event)
            changed = json.loads(out[0]["item"]["output"])
            assert changed["action"] == "updated"  # a new version of the same memory
            assert "Margaret" in instructions_of(out) and "Maggie" not in instructions_of(out)

            await adapter.handle(
                transcript(
                    f"The password to my shed is {SENTINEL}. My daughter Sarah lives in Denver, "
                    "and I love gardening."
                )
            )
            for event in tool_call(
                "c3",
                "store_memory",
                {"memory_type": "preference", "key": "like_gardening", "value": "gardening"},
            ):
                await adapter.handle(event)
            await adapter.handle(reply("Gardening is wonderful."))

            ended = await http.post(f"/sessions/{sid}/end", headers=auth)
            assert ended.json() == {"summarization": "scheduled"}
            await services.tasks.join()
            # Extraction skipped the name the agent stored; the city it inferred (the
            # daughter's, in fact) waits for the user, who rejects it.
            pending = await http.get("/v1/proposals", params={"user_id": LINE}, headers=auth)
            (proposal,) = pending.json()["proposals"]
            assert (proposal["key"], proposal["proposed_value"]) == ("city", "Denver")
            rejected = await http.post(f"/v1/proposals/{proposal['id']}/reject", headers=auth)
            assert rejected.status_code in (200, 204), rejected.text

            listing = await http.get("/v1/memories", params={"user_id": LINE}, headers=auth)
            stored = {m["key"]: m for m in listing.json()["memories"]}
            metrics = (await http.get("/metrics", headers=auth)).text

    assert stored["preferred_name"]["value"] == "Margaret"
    assert stored["preferred_name"]["version"] == 2  # Maggie, then Margaret
    assert stored["preferred_name"]["type"] == "preference"  # as first stored
    assert stored["daughter_name"]["value"] == "Sarah"  # extracted
    assert "likes_gardening" in EXTRACTED and "likes_gardening" not in stored  # a duplicate
    assert set(stored) == {"preferred_name", "daughter_name", "like_gardening"}
    assert "confide_duplicates_skipped_total 1" in metrics
    sent = llm_server.requests[0].messages[1]["content"]
    assert SENTINEL in sent  # the model did see the conversation...

    row = services.tables.get_session(sid, account_id=ACCOUNT)
    assert row.tool_calls == 3 and row.memories_extracted == 1
    events = services.tables.events(sid, account_id=ACCOUNT)
    assert [e.tool for e in events if e.kind == "tool_call"] == [
        "store_memory",
        "update_memory",
        "store_memory",
    ]
    assert services.buffer.get(sid) is None

    # ...and nothing of it is anywhere else: files under the test's home and database
    # (SQLite with its WAL, or PostgreSQL's relation files), and every log record at DEBUG.
    disk = everything_on_disk(tmp_path, storage)
    assert len(disk) > 1000
    for secret in (SENTINEL, "Denver", "Margaret", "Maggie", "shed is"):
        assert secret.encode() not in disk, secret
        assert secret not in caplog.text, secret
