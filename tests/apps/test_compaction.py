"""Compaction on both backends with the scripted LLM over real HTTP: 11 memories become 10 by
the LLM's delete or edit, and every failure path (LLM error, timeout, invalid decision,
database error after one retry) falls back to FIFO, audited with reason and decider."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.apps.conftest import ACCOUNT, llm_of, transcript
from tests.conftest import TEST_KEK, make_storage

from confide.apps import AppMemories, AppScope, reason_of
from confide.apps.service import EndOutcome
from confide.apps.writer import LLMMemoryWriter
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage.keystore import open_key_store
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.types import HistoryEventType, Memory, MemoryState

APP = "notes"
SCOPE = AppScope(ACCOUNT, APP)
NEW = "The user asked for weekly digests on Mondays."
_IDS = re.compile(r"\[([0-9a-f-]{36})\]")


@pytest.fixture
def full(engine: MemoryEngine) -> list[Memory]:
    """The app at its cap of 10 (offline memories), oldest first."""
    offline = AppMemories(engine, llm=None)
    for n in range(10):
        asyncio.run(
            offline.end_conversation(
                account_id=ACCOUNT, app_id=APP, conversation_id=f"c{n}", messages=transcript(n)
            )
        )
    return list(reversed(offline.memories(ACCOUNT, APP)))


def _end(apps: AppMemories, n: int = 10) -> EndOutcome:
    return asyncio.run(
        apps.end_conversation(
            account_id=ACCOUNT, app_id=APP, conversation_id=f"c{n}", messages=transcript(n)
        )
    )


def _decision(action: str, target: str, content: str | None = None) -> str:
    body: dict[str, Any] = {"action": action, "targetMemoryId": target, "reason": "overlaps"}
    if content is not None:
        body["newContent"] = content
    return json.dumps(body)


def _active_ids(apps: AppMemories) -> set[str]:
    return {m.id for m in apps.memories(ACCOUNT, APP)}


def _evicted(engine: MemoryEngine, memory: Memory) -> dict[str, Any]:
    """The meta of the compaction's DELETE event of ``memory``."""
    [event] = [e for e in engine.history(memory.id, account_id=ACCOUNT) if e.event == "DELETE"]
    assert engine.get(memory.id, account_id=ACCOUNT).state == MemoryState.SOFT_DELETED
    return event.meta


def test_delete_decision_brings_11_to_10(
    engine: MemoryEngine, full: list[Memory], llm_server: ScriptedLLMServer
) -> None:
    target = full[4]
    llm_server.enqueue(NEW, _decision("delete", target.id))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = _end(apps)
    assert outcome.compaction is not None
    assert outcome.compaction.changes == (("delete", "llm", None),)
    assert outcome.compaction.count == 10
    assert _active_ids(apps) == {m.id for m in full if m != target} | {outcome.memory.id}  # type: ignore[union-attr]
    meta = _evicted(engine, target)
    assert meta["decided_by"] == "llm" and meta["compaction"] == "delete"
    assert reason_of(engine, SCOPE, meta) == "overlaps"
    # The decision request showed every memory with its id, and the new one.
    prompt = llm_server.requests[1].messages[1]["content"]
    assert set(_IDS.findall(prompt)) == {m.id for m in full} | {outcome.memory.id}  # type: ignore[union-attr]
    assert '"action": "delete" | "edit"' in llm_server.requests[1].messages[0]["content"]


def test_edit_decision_merges_into_the_target(
    engine: MemoryEngine, full: list[Memory], llm_server: ScriptedLLMServer
) -> None:
    target = full[2]
    merged_text = "The user prefers option 2 and weekly digests on Mondays."
    llm_server.enqueue(NEW, _decision("edit", target.id, merged_text))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = _end(apps)
    new = outcome.memory
    assert new is not None and outcome.compaction is not None
    assert outcome.compaction.changes == (("edit", "llm", None),)
    memories = apps.memories(ACCOUNT, APP)
    assert len(memories) == 10
    [edited] = [m for m in memories if m.lineage_id == target.lineage_id]
    assert edited.value == merged_text and edited.version == 2
    assert edited.created_at == target.created_at
    assert new.id not in {m.id for m in memories}
    merge = [e for e in engine.history(edited.id, account_id=ACCOUNT) if e.event == "MERGE"]
    assert len(merge) == 1 and merge[0].meta["merged_ids"] == [new.id]
    assert merge[0].meta["decided_by"] == "llm"
    assert reason_of(engine, SCOPE, merge[0].meta) == "overlaps"
    assert _evicted(engine, new)["merged_ids"] == [new.id]


def _assert_fifo(engine: MemoryEngine, apps: AppMemories, full: list[Memory], cause: str) -> None:
    memories = apps.memories(ACCOUNT, APP)
    assert len(memories) == 10
    assert full[0].id not in {m.id for m in memories}
    meta = _evicted(engine, full[0])
    assert (meta["decided_by"], meta["cause"]) == ("fallback", cause)
    assert reason_of(engine, SCOPE, meta) == f"fifo: the oldest memory is evicted ({cause})"


def test_llm_error_falls_back_to_fifo(
    engine: MemoryEngine, full: list[Memory], llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(NEW, ScriptedReply(status=503, body=b'{"error": "busy"}'))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = _end(apps)
    assert outcome.compaction is not None
    assert outcome.compaction.changes == (("delete", "fallback", "llm_error"),)
    _assert_fifo(engine, apps, full, "llm_error")


def test_llm_timeout_falls_back_to_fifo(
    engine: MemoryEngine, settings: Settings, full: list[Memory], llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(NEW, ScriptedReply(content=_decision("delete", full[5].id), delay=5.0))
    quick = settings.model_copy(update={"app_llm_timeout": 0.3})
    # Only the compaction call is meant to time out: the writer's prompt gets the default
    # timeout, so a loaded machine's slow reply to it is not taken for the one under test.
    llm = llm_of(llm_server)
    writer = LLMMemoryWriter(llm, timeout=settings.app_llm_timeout)
    apps = AppMemories(engine, settings=quick, llm=llm, writer=writer)
    _end(apps)
    _assert_fifo(engine, apps, full, "llm_timeout")
    assert full[5].id in _active_ids(apps)


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        '["delete"]',
        _decision("delete", "00000000-0000-0000-0000-000000000000"),
        _decision("shrink", "{target}"),
        _decision("edit", "{target}"),
        _decision("edit", "{target}", "   "),
    ],
    ids=["bad-json", "not-object", "unknown-id", "bad-action", "no-content", "blank-content"],
)
def test_invalid_decision_falls_back_to_fifo(
    engine: MemoryEngine, full: list[Memory], llm_server: ScriptedLLMServer, answer: str
) -> None:
    llm_server.enqueue(NEW, answer.replace("{target}", full[3].id))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    _end(apps)
    _assert_fifo(engine, apps, full, "invalid_decision")
    assert full[3].id in _active_ids(apps)


def test_an_edit_that_breaks_the_writing_rules_falls_back_to_fifo(
    engine: MemoryEngine, full: list[Memory], llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(NEW, _decision("edit", full[3].id, "We agreed on weekly digests."))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    _end(apps)
    _assert_fifo(engine, apps, full, "invalid_decision")
    assert full[3].id in _active_ids(apps)  # the target keeps its content
    assert apps.compactor.writing.reasons == {"not_third_person": 1}
    assert apps.compactor.writing.first_pass_rate == 0.0


def test_edit_of_the_new_memory_into_itself_is_invalid(
    engine: MemoryEngine, full: list[Memory], llm_server: ScriptedLLMServer
) -> None:
    def answer(request: RecordedRequest) -> ScriptedReply:
        if "New memory:" not in request.messages[-1]["content"]:
            return ScriptedReply(content=NEW)
        new_id = _IDS.findall(request.messages[-1]["content"])[-1]
        return ScriptedReply(content=_decision("edit", new_id, "merged"))

    with ScriptedLLMServer(responder=answer) as server:
        apps = AppMemories(engine, llm=llm_of(server))
        _end(apps)
    _assert_fifo(engine, apps, full, "invalid_decision")


@pytest.fixture
def blocked(engine: MemoryEngine, full: list[Memory]) -> Iterator[Memory]:
    """A real database error: a trigger refuses every change of one memory's row."""
    target = full[6]
    if engine.storage.name == "sqlite":
        ddl = [
            "CREATE TRIGGER block_target BEFORE UPDATE ON memories "
            f"WHEN OLD.id = '{target.id}' BEGIN SELECT RAISE(ABORT, 'blocked'); END"
        ]
    else:
        ddl = [
            "CREATE FUNCTION block_target() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'blocked'; END $$",
            "CREATE TRIGGER block_target BEFORE UPDATE ON memories FOR EACH ROW "
            f"WHEN (OLD.id = '{target.id}') EXECUTE FUNCTION block_target()",
        ]
    with engine.storage.transaction() as tx:
        for statement in ddl:
            tx.run(statement)
    yield target


def test_database_error_after_one_retry_falls_back_to_fifo(
    engine: MemoryEngine, full: list[Memory], blocked: Memory, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(NEW, _decision("delete", blocked.id))
    apps = AppMemories(engine, llm=llm_of(llm_server))
    outcome = _end(apps)
    assert outcome.compaction is not None
    assert outcome.compaction.changes == (("delete", "fallback", "database_error"),)
    _assert_fifo(engine, apps, full, "database_error")
    assert blocked.id in _active_ids(apps)
    assert len(llm_server.requests) == 2  # the decision was retried, not asked again


def test_without_llm_fifo_every_time(engine: MemoryEngine, full: list[Memory]) -> None:
    apps = AppMemories(engine, llm=None)
    outcome = _end(apps)
    assert outcome.compaction is not None
    assert outcome.compaction.changes == (("delete", "fallback", "no_llm"),)
    _assert_fifo(engine, apps, full, "no_llm")


def _picker(position: int) -> Callable[[RecordedRequest], ScriptedReply]:
    """Writes a memory, or deletes the memory listed at ``position`` (0: the oldest)."""

    def answer(request: RecordedRequest) -> ScriptedReply:
        prompt = request.messages[-1]["content"]
        if "New memory:" not in prompt:
            return ScriptedReply(content=NEW)
        return ScriptedReply(content=_decision("delete", _IDS.findall(prompt)[position]))

    return answer


@pytest.mark.parametrize("with_llm", [True, False], ids=["llm", "fifo"])
def test_concurrent_ends_on_two_workers_leave_exactly_the_cap(
    engine: MemoryEngine,
    settings: Settings,
    storage_url: str,
    key_store_url: str,
    full: list[Memory],
    with_llm: bool,
) -> None:
    """Two engines (two connection pools, as two workers) over one database end
    conversations of one app at the same moment, round after round."""
    other_storage = make_storage(storage_url)
    other_keys = open_key_store(key_store_url)
    other = MemoryEngine(
        other_storage, KeyRing(primary=TEST_KEK), settings=settings, key_store=other_keys
    )
    rounds = 6
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    # The two workers' models choose different memories, so only the scope lock and the
    # count under it keep them from evicting one memory too many.
    with (
        ScriptedLLMServer(responder=_picker(0)) as one,
        ScriptedLLMServer(responder=_picker(1)) as two,
    ):
        workers = [
            AppMemories(e, llm=llm_of(s) if with_llm else None)
            for e, s in ((engine, one), (other, two))
        ]

        def run(apps: AppMemories, worker: int) -> None:
            try:
                for r in range(rounds):
                    barrier.wait(timeout=30)
                    _end(apps, 100 + 10 * r + worker)
                    barrier.wait(timeout=30)
                    assert len(apps.memories(ACCOUNT, APP)) == 10
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=run, args=(w, i)) for i, w in enumerate(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    other.close()
    assert not errors, errors
    memories = workers[0].memories(ACCOUNT, APP)
    assert len(memories) == 10
    # Nothing was lost beyond the evictions: the newest ends are all kept.
    kept = {m.metadata["conversation_id"] for m in memories}
    assert {f"c{100 + 10 * (rounds - 1) + w}" for w in (0, 1)} <= kept
    deleted = [
        e
        for m in full
        for e in engine.history(m.id, account_id=ACCOUNT)
        if e.event == HistoryEventType.DELETE
    ]
    assert len(deleted) + sum(1 for m in full if m.id in {x.id for x in memories}) == 10
