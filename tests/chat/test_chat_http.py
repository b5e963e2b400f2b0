"""The chat flow over HTTP on both backends: 31 messages make one summary (range 0-20) whose
facts appear in the subject's list, no message text lies in clear in the data files, and
facts are private until their owner shares them."""

from __future__ import annotations

import json

import pytest
from tests.chat.conftest import ACCOUNT, ApiFactory, ChatApi

from confide.chat.history import CHUNK_CATEGORY
from confide.engine import MemoryEngine
from confide.storage.base import Capability
from confide.storage.chat import SqlMessageTables
from confide.testing.scripted_llm import ScriptedLLMServer
from confide.types import HistoryEventType, MemoryFilter

pytestmark = pytest.mark.asyncio

SUMMARY = json.dumps(
    {
        "summary": "Ann spoke about her family and her garden.",
        "facts": [
            {"category": "relationship", "content": "Ann's grandson Theo plays the cello"},
            {"category": "hobby", "content": "Ann grows tomatoes"},
        ],
    }
)


def _line(i: int) -> str:
    return f"zanzibar-quokka-{i:02d} is what I said"


async def _conversation(api: ChatApi, user: str = "user-1") -> None:
    for i in range(31):
        role = "user" if i % 2 == 0 else "assistant"
        await api.say("conv-1", user, _line(i), role=role, subject_id="ann")
    await api.join()


@pytest.mark.requires(Capability.DATA_FILES)
async def test_31_messages_make_one_summary_and_stay_sealed(
    chat_api: ApiFactory, engine: MemoryEngine
) -> None:
    with ScriptedLLMServer(default=SUMMARY) as server:
        async with chat_api(llm_base_url=server.base_url, llm_model="scripted") as api:
            await _conversation(api)
            [summary] = SqlMessageTables(engine.storage).summaries(ACCOUNT, "conv-1")
            assert (summary.range_start, summary.range_end) == (0, 20)
            chunks = engine.list_memories(
                MemoryFilter(account_id=ACCOUNT, user_id="user-1", categories=(CHUNK_CATEGORY,))
            )
            assert [c.id for c in chunks] == [summary.memory_id]
            assert chunks[0].metadata["range_start"] == 0
            assert chunks[0].metadata["range_end"] == 20
            listed = await api.get("/v1/subjects/ann/facts", user_id="user-1")
            assert listed.status_code == 200, listed.text
            facts = listed.json()["facts"]
            assert [(f["category"], f["content"], f["visibility"]) for f in facts] == [
                ("relationship", "Ann's grandson Theo plays the cello", "private"),
                ("hobby", "Ann grows tomatoes", "private"),
            ]
            assert server.requests  # the summary came from the model, over HTTP
    storage = engine.storage
    storage.scrub()  # fold the logs into the data files
    blobs = [path.read_bytes() for path in storage.data_files()]
    assert blobs
    found = [i for i in range(31) if any(_line(i).encode() in blob for blob in blobs)]
    assert found == []
    assert not any(b"zanzibar-quokka" in blob for blob in blobs)


async def test_facts_are_private_until_shared_and_only_the_owner_decides(
    chat_api: ApiFactory, engine: MemoryEngine
) -> None:
    with ScriptedLLMServer(default=SUMMARY) as server:
        async with chat_api(llm_base_url=server.base_url, llm_model="scripted") as api:
            await _conversation(api)
            await api.say("conv-2", "user-2", "How is Ann?", subject_id="ann")
            mine = (await api.get("/v1/subjects/ann/facts", user_id="user-1")).json()["facts"]
            cello = next(f for f in mine if "cello" in f["content"])
            tomatoes = next(f for f in mine if "tomatoes" in f["content"])

            async def seen_by_user_2() -> tuple[list[str], str]:
                listed = await api.get("/v1/subjects/ann/facts", user_id="user-2")
                history = await api.post(
                    "/v1/conversations/conv-2/retrieve", {"user_id": "user-2", "input": "Ann"}
                )
                context = "\n".join(m["content"] for m in history.json()["contextMessages"])
                return [f["content"] for f in listed.json()["facts"]], context

            assert await seen_by_user_2() == ([], "")

            shared = await api.patch(
                f"/v1/facts/{cello['id']}/visibility",
                {"user_id": "user-1", "visibility": "shared"},
            )
            assert shared.status_code == 200, shared.text
            assert shared.json()["visibility"] == "shared"
            contents, context = await seen_by_user_2()
            assert contents == ["Ann's grandson Theo plays the cello"]
            assert context == (
                "Known facts about ann from conversations:\n"
                "- [relationship] Ann's grandson Theo plays the cello (shared)"
            )
            own = await api.post(
                "/v1/conversations/conv-1/retrieve", {"user_id": "user-1", "input": "hello"}
            )
            assert own.json()["contextMessages"][-1]["content"] == (
                "Known facts about ann from conversations:\n"
                "- [relationship] Ann's grandson Theo plays the cello (shared)\n"
                "- [hobby] Ann grows tomatoes (personal)"
            )

            # Nobody but the owner may change or delete a fact: 404, as for no fact at all.
            missing = await api.delete("/v1/facts/no-such-fact", user_id="user-2")
            assert missing.status_code == 404
            for response in (
                await api.patch(
                    f"/v1/facts/{cello['id']}/visibility",
                    {"user_id": "user-2", "visibility": "private"},
                ),
                await api.patch(
                    f"/v1/facts/{tomatoes['id']}/visibility",
                    {"user_id": "user-2", "visibility": "shared"},
                ),
                await api.delete(f"/v1/facts/{cello['id']}", user_id="user-2"),
            ):
                assert response.status_code == 404
                assert response.json() == missing.json()
            bad = await api.patch(
                f"/v1/facts/{cello['id']}/visibility", {"user_id": "user-1", "visibility": "all"}
            )
            assert bad.status_code == 400

            unshared = await api.patch(
                f"/v1/facts/{cello['id']}/visibility",
                {"user_id": "user-1", "visibility": "private"},
            )
            assert unshared.json()["visibility"] == "private"
            assert await seen_by_user_2() == ([], "")

            deleted = await api.delete(f"/v1/facts/{tomatoes['id']}", user_id="user-1")
            assert deleted.status_code == 204
            left = (await api.get("/v1/subjects/ann/facts", user_id="user-1")).json()["facts"]
            assert [f["id"] for f in left] == [cello["id"]]
            again = await api.delete(f"/v1/facts/{tomatoes['id']}", user_id="user-1")
            assert again.status_code == 404

    events = [
        (e.event, e.actor, e.meta.get("visibility"))
        for e in reversed(engine.history(cello["id"], account_id=ACCOUNT))
    ]
    assert events[1:] == [
        (HistoryEventType.PRIVACY, "user-1", "shared"),
        (HistoryEventType.PRIVACY, "user-1", "private"),
    ]
    deletion = engine.history(tomatoes["id"], account_id=ACCOUNT)[0]
    assert (deletion.event, deletion.actor) == (HistoryEventType.DELETE, "user-1")
