"""A worker process killed (SIGKILL) mid-job on PostgreSQL: another worker finishes the job
once its lease expires, and the job's effect exists exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.jobs import JobState, SqlJobTables
from confide.storage.postgres import PostgresStorage
from confide.testing.postgres import EmbeddedPostgres
from confide.testing.scripted_llm import RecordedRequest, ScriptedLLMServer, ScriptedReply
from confide.types import MemoryFilter
from confide.workers import Handler, Worker

# The job: ask the model for a note, then store it and complete the job in one transaction.
HANDLER = """
import asyncio

from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.workers import JobContext, Worker


def note_job(base_url):
    llm = OpenAICompatibleLLM(base_url=base_url, model="scripted")

    def run(ctx: JobContext) -> None:
        answer = asyncio.run(
            llm.complete([{"role": "user", "content": "note"}], temperature=0, timeout=120)
        )
        ctx.engine.commit_batch(
            new=[{"account_id": ctx.job.account_id, "user_id": ctx.payload["user_id"],
                  "key": "note", "value": answer}],
            within=lambda tx, _: ctx.complete_within(tx),
        )

    return run
"""

# The same handler, for the surviving worker in this process.
_HANDLER_NAMESPACE: dict[str, Any] = {}
exec(HANDLER, _HANDLER_NAMESPACE)
note_job: Callable[[str], Handler] = _HANDLER_NAMESPACE["note_job"]

WORKER = (
    HANDLER
    + """
import sys
from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.postgres import PostgresStorage

uri, kek, base_url = sys.argv[1], sys.argv[2], sys.argv[3]
settings = Settings(encryption_key=kek, worker_lease_seconds=1.0)
storage = PostgresStorage(uri, max_size=2, features=FEATURES)
engine = MemoryEngine(storage, KeyRing(primary=bytes.fromhex(kek)), settings=settings)
worker = Worker(engine, settings, worker_id="doomed")
worker.register("note", note_job(base_url))
worker.run_once()
"""
)


def test_a_killed_workers_job_is_finished_once_by_another(
    postgres_server: EmbeddedPostgres, request: pytest.FixtureRequest
) -> None:
    uri = postgres_server.temporary_database(request, template="confide_template")
    kek = bytes(range(32)).hex()
    first_call = threading.Event()

    def answer(req: RecordedRequest) -> ScriptedReply:
        if not first_call.is_set():
            first_call.set()
            return ScriptedReply(content="never delivered", delay=120)  # until it is killed
        return ScriptedReply(content="Ana prefers tea in the morning")

    settings = Settings(encryption_key=kek, worker_lease_seconds=1.0)
    storage = PostgresStorage(uri, max_size=2, features=FEATURES)
    engine = MemoryEngine(storage, KeyRing(primary=bytes.fromhex(kek)), settings=settings)
    queue = SqlJobTables(storage.database)
    with ScriptedLLMServer(responder=answer) as llm:
        job_id = queue.enqueue(
            "note", account_id="acct", payload={"user_id": "ana"}, run_at=0, now=time.time()
        )
        assert job_id is not None
        doomed = subprocess.Popen([sys.executable, "-c", WORKER, uri, kek, llm.base_url])
        try:
            assert first_call.wait(60), "the worker never called the model"
            held = queue.get_job(job_id)
            assert held is not None and held.state == JobState.RUNNING
            assert held.lease_owner == "doomed"
        finally:
            doomed.send_signal(signal.SIGKILL)
            assert doomed.wait(30) == -signal.SIGKILL

        # Another worker, its clock past the dead worker's lease (no waiting for it). Until
        # PostgreSQL notices the dead client, its last transaction may still hold the job's
        # row, which a claim skips: the survivor polls as a worker does, until it is done.
        survivor = Worker(engine, settings, worker_id="survivor", clock=lambda: time.time() + 5)
        survivor.register("note", note_job(llm.base_url))
        reports = []
        for _ in range(200):
            reports.append(survivor.run_once())
            if reports[-1].ran:
                break
            threading.Event().wait(settings.worker_poll_seconds / 50)
        report = reports[-1]
        assert (report.done, report.lost, report.retried) == (1, 0, 0), report
        assert len(llm.requests) == 2

    job = queue.get_job(job_id)
    assert job is not None and job.state == JobState.DONE
    assert (job.attempts, job.lease_owner) == (2, "survivor")
    notes = engine.list_memories(MemoryFilter(account_id="acct", user_id="ana"))
    assert [m.value for m in notes] == ["Ana prefers tea in the morning"]
    assert survivor.run_once().ran == 0
    storage.close()
