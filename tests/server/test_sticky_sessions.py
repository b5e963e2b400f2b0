"""Many workers, one database: a call's turns live in one process, and the others refuse.

Two services over one store (in-process on both backends, then two ``confide serve``
processes on one PostgreSQL): the first to buffer a turn holds the call; the other answers
``/turns``, ``/end`` and the Realtime socket with 409 naming the holder, and never
summarises part of the call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from tests.server.conftest import ACCOUNT
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.server.auth import ApiKeys
from confide.storage import open_storage
from confide.testing.loopback import serve_on_loopback
from confide.testing.postgres import EmbeddedPostgres, create_schema
from confide.testing.processes import confide_env, serve
from confide.testing.scripted_llm import ScriptedLLMServer

HELD = "Call session is held by another worker"
EXTRACTED = json.dumps([{"type": "fact", "key": "dog_name", "value": "Biscuit"}])


class TwoWorkers:
    """Two apps over one engine, as two processes over one database."""

    def __init__(self, engine: MemoryEngine, settings: Settings) -> None:
        quick = settings.model_copy(update={"min_session_seconds": 0.0})
        self.apps = [create_app(quick, engine=engine), create_app(quick, engine=engine)]
        self.token = self.apps[0].state.services.keys.create(ACCOUNT)
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.clients = [
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w")
            for app in self.apps
        ]

    def worker(self, n: int) -> dict[str, object]:
        me = self.apps[n].state.services.worker
        return {"id": me.id, "host": me.host, "pid": me.pid}

    async def post(self, n: int, path: str, body: object = None) -> httpx.Response:
        return await self.clients[n].post(path, json=body, headers=self.auth)


@pytest_asyncio.fixture
async def two(engine: MemoryEngine, settings: Settings) -> AsyncIterator[TwoWorkers]:
    workers = TwoWorkers(engine, settings)
    try:
        yield workers
    finally:
        for client, app in zip(workers.clients, workers.apps, strict=True):
            await client.aclose()
            await app.state.services.tasks.join()


def _turn(text: str) -> dict[str, str]:
    return {"speaker": "user", "text": text}


@pytest.mark.asyncio
async def test_the_worker_holding_the_turns_is_the_only_one_that_takes_them(
    two: TwoWorkers,
) -> None:
    created = await two.post(1, "/sessions", {"accountId": ACCOUNT, "lineId": "line-1"})
    sid = created.json()["callSessionId"]
    assert (await two.post(1, f"/sessions/{sid}/connected")).status_code == 200
    # Created and connected on worker 1, but its first turn reaches worker 0: 0 holds it.
    assert (await two.post(0, f"/sessions/{sid}/turns", _turn("My dog is Biscuit."))).json() == {
        "success": True
    }
    refused = await two.post(1, f"/sessions/{sid}/turns", _turn("He is twelve."))
    assert refused.status_code == 409
    assert refused.json() == {
        "success": False,
        "error": HELD,
        "type": "SessionHeldError",
        "worker": two.worker(0),
    }
    ended_elsewhere = await two.post(1, f"/sessions/{sid}/end")
    assert ended_elsewhere.status_code == 409 and ended_elsewhere.json()["error"] == HELD
    elsewhere = two.apps[1].state.services.buffer.get(sid)
    assert elsewhere is None or elsewhere.turns == ()
    # The call is still live: its holder takes more turns and ends it.
    assert (await two.post(0, f"/sessions/{sid}/turns", _turn("He is twelve."))).status_code == 200
    ended = await two.post(0, f"/sessions/{sid}/end")
    assert ended.json() == {"summarization": "scheduled"}
    row = two.apps[0].state.services.tables.get_session(sid, account_id=ACCOUNT)
    assert row is not None and row.ended_at is not None and row.worker_id == two.worker(0)["id"]
    # Once ended, any worker answers as before (the call is over, nothing to summarise).
    again = await two.post(1, f"/sessions/{sid}/end")
    assert again.json() == {"summarization": "skipped", "reason": "session had already ended"}


@pytest.mark.asyncio
async def test_ending_a_call_claims_it_so_a_late_turn_elsewhere_is_refused(
    two: TwoWorkers,
) -> None:
    created = await two.post(0, "/sessions", {"accountId": ACCOUNT, "lineId": "line-2"})
    sid = created.json()["callSessionId"]
    # Worker 1 ends a call no worker held (no turns anywhere): it ends there.
    ended = await two.post(1, f"/sessions/{sid}/end")
    assert ended.json()["summarization"] == "skipped"
    late = await two.post(0, f"/sessions/{sid}/turns", _turn("Too late."))
    assert late.status_code == 409


def test_the_realtime_socket_reaching_another_worker_is_refused_with_the_same_409(
    engine: MemoryEngine, settings: Settings
) -> None:
    holder, other = (create_app(settings, engine=engine) for _ in range(2))
    token = holder.state.services.keys.create(ACCOUNT)
    auth = {"Authorization": f"Bearer {token}"}
    me = holder.state.services.worker
    with (
        serve_on_loopback(holder) as base_a,
        serve_on_loopback(other) as base_b,
        httpx.Client(timeout=30) as client,
    ):
        sid = client.post(
            f"{base_a}/sessions", json={"accountId": ACCOUNT, "lineId": "line-ws"}, headers=auth
        ).json()["callSessionId"]
        assert client.post(
            f"{base_a}/sessions/{sid}/turns", json=_turn("Hello."), headers=auth
        ).is_success
        url = base_b.replace("http://", "ws://") + f"/sessions/{sid}/realtime"
        with pytest.raises(InvalidStatus) as refused:
            connect(url, additional_headers=auth, open_timeout=30)
        response = refused.value.response
        assert response.status_code == 409
        assert json.loads(response.body or b"") == {
            "success": False,
            "error": HELD,
            "type": "SessionHeldError",
            "worker": {"id": me.id, "host": me.host, "pid": me.pid},
        }
        # The refusal changed nothing: the call is live on its holder.
        row = holder.state.services.tables.get_session(sid, account_id=ACCOUNT)
        assert row is not None and row.ended_at is None


@pytest.mark.postgres
def test_two_serve_processes_on_one_postgres_refuse_each_others_calls(
    postgres_server: EmbeddedPostgres,
    keys_database: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    uri = postgres_server.temporary_database(request, template="confide_template")
    keys_uri = create_schema(keys_database)
    storage = open_storage(uri, pool_max=2)
    try:
        token = ApiKeys.over(storage).create(ACCOUNT)
    finally:
        storage.close()
    auth = {"Authorization": f"Bearer {token}"}
    with ScriptedLLMServer([EXTRACTED]) as llm:
        env = confide_env(
            {
                "CONFIDE_HOME": str(tmp_path / "home"),
                "MEMORY_ENCRYPTION_KEY": "33" * 32,
                "CONFIDE_STORAGE_URL": uri,
                "CONFIDE_KEYSTORE_URL": keys_uri,
                "CONFIDE_EMBEDDER": "none",
                "CONFIDE_MIN_SESSION_SECONDS": "0",
                "CONFIDE_LLM_BASE_URL": llm.base_url,
                "CONFIDE_LLM_MODEL": "scripted",
            }
        )
        first, second = serve(env), serve(env)
        with first, second, httpx.Client(timeout=60) as client:
            a, b = first.wait_ready(), second.wait_ready()
            sid = client.post(
                f"{b}/sessions", json={"accountId": ACCOUNT, "lineId": "line-pg"}, headers=auth
            ).json()["callSessionId"]
            assert client.post(f"{b}/sessions/{sid}/connected", headers=auth).is_success
            said = ["My dog is called Biscuit.", "He is twelve.", "He likes the park."]
            assert client.post(f"{a}/sessions/{sid}/turns", json=_turn(said[0]), headers=auth)
            refused = client.post(f"{b}/sessions/{sid}/turns", json=_turn(said[1]), headers=auth)
            assert refused.status_code == 409
            body = refused.json()
            assert body["error"] == HELD and body["worker"]["pid"] == first.pid
            assert client.post(f"{b}/sessions/{sid}/end", headers=auth).status_code == 409
            for text in said[1:]:
                response = client.post(f"{a}/sessions/{sid}/turns", json=_turn(text), headers=auth)
                assert response.status_code == 200
            ended = client.post(f"{a}/sessions/{sid}/end", headers=auth)
            assert ended.json() == {"summarization": "scheduled"}
            first.stop()  # its background extraction finishes before it exits
            status = client.get(f"{b}/sessions/{sid}", headers=auth).json()
        # One extraction, by the holder, over the whole call: every turn was in it.
        assert len(llm.requests) == 1
        prompt = json.dumps(llm.requests[0].messages)
        assert all(text in prompt for text in said)
    assert status["summarization"] == "done" and status["memoriesExtracted"] == 1
