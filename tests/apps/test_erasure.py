"""Erasing a user deletes the app memories written from their words, on both backends: the
memory of a conversation with them (ended over HTTP with ``userId``), every memory it was
merged into, and work deferred with their words; other users' app memories stay."""

from __future__ import annotations

import asyncio

import pytest
import time_machine
from tests.apps.conftest import ACCOUNT, ApiFactory, llm_of, transcript
from tests.apps.test_compaction import _decision
from tests.apps.test_usage import ONE_AM, Clock, _budgeted

from confide.apps import AppMemories
from confide.apps.service import EndOutcome
from confide.engine import MemoryEngine
from confide.testing.scripted_llm import ScriptedLLMServer

APP = "notes"


def _end(apps: AppMemories, n: int, user_id: str | None) -> EndOutcome:
    return asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT,
            app_id=APP,
            conversation_id=f"c{n}",
            messages=transcript(n),
            user_id=user_id,
        )
    )


@pytest.mark.asyncio
async def test_erasing_a_user_over_http_deletes_the_app_memory_of_their_conversation(
    apps_api: ApiFactory,
) -> None:
    async with apps_api() as api:
        for n, user in enumerate(("ann", "bob")):
            body = {"messages": transcript(n), "userId": user}
            response = await api.end(APP, f"c{n}", body)
            assert response.status_code == 202, response.text
        await api.join()
        before = {m.metadata["conversation_id"] for m in api.apps.memories(ACCOUNT, APP)}
        assert before == {"c0", "c1"}

        erased = await api.client.delete("/v1/users/ann", headers=api.headers(admin=True))

        assert erased.status_code == 200, erased.text
        assert erased.json()["deleted"]["derived_memories"] == 1
        after = [m.metadata["conversation_id"] for m in api.apps.memories(ACCOUNT, APP)]
        assert after == ["c1"]


@pytest.mark.asyncio
async def test_a_service_key_may_not_name_an_app_owner_as_the_user(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        body = {"messages": transcript(1), "userId": "app:notes"}
        response = await api.end(APP, "c1", body)
        assert response.status_code == 403, response.text


def test_a_memory_merged_from_the_users_words_goes_with_them(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    offline = AppMemories(engine, llm=None, settings=engine.settings.model_copy(
        update={"app_memory_cap": 2}))  # fmt: skip
    kept, target = (_end(offline, n, "bob").memory for n in range(2))
    assert kept is not None and target is not None
    merged = "The user prefers option 1 and weekly digests on Mondays."
    llm_server.enqueue("The user asked for weekly digests.", _decision("edit", target.id, merged))
    apps = AppMemories(engine, llm=llm_of(llm_server), settings=offline.settings)
    outcome = _end(apps, 2, "ann")
    assert outcome.compaction is not None and outcome.compaction.changes == (("edit", "llm", None),)
    assert merged in {m.value for m in apps.memories(ACCOUNT, APP)}

    receipt = engine.erase_user(account_id=ACCOUNT, user_id="ann")

    # Ann's own memory (merged, forgotten) and both versions of the one it was merged into.
    assert receipt.deleted["derived_memories"] == 3
    assert [m.id for m in apps.memories(ACCOUNT, APP)] == [kept.id]
    assert engine.storage.lineage(ACCOUNT, target.lineage_id) == []


@time_machine.travel(ONE_AM, tick=True)
def test_work_deferred_with_the_users_words_goes_with_them(
    engine: MemoryEngine, llm_server: ScriptedLLMServer
) -> None:
    apps, ledger = _budgeted(engine, llm_server, Clock())
    ledger.record(
        account_id=ACCOUNT, operation="other", scope=None, prompt_tokens=0,
        completion_tokens=0, calls=9,
    )  # fmt: skip
    assert _end(apps, 1, "ann").deferred and _end(apps, 2, "bob").deferred
    assert apps.deferred_count(ACCOUNT) == 2

    receipt = engine.erase_user(account_id=ACCOUNT, user_id="ann")

    assert receipt.deleted["deferred_work"] == 1
    assert apps.deferred_count(ACCOUNT) == 1
