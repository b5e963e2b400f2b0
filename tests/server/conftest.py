"""Service fixtures: the app over the parametrised ``engine`` (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.testing.loop_guard import LoopGuard

ACCOUNT = "acct-1"


@dataclass
class Api:
    """An in-process client with a valid key for ``ACCOUNT`` and the app behind it."""

    app: FastAPI
    client: httpx.AsyncClient
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def post(self, path: str, body: object = None) -> httpx.Response:
        return await self.client.post(path, json=body, headers=self.auth)

    async def session(self, line: str = "line-1", *, connected: bool = True) -> str:
        response = await self.post("/sessions", {"accountId": ACCOUNT, "lineId": line})
        assert response.status_code == 200, response.text
        session_id = str(response.json()["callSessionId"])
        if connected:
            assert (await self.post(f"/sessions/{session_id}/connected")).status_code == 200
        return session_id

    async def end_call(self, text: str, *, line: str = "line-1") -> str:
        """A connected call on ``line`` where the user says ``text``, ended (its
        summarisation scheduled); its id."""
        session_id = await self.session(line)
        turn = {"speaker": "user", "text": text}
        assert (await self.post(f"/sessions/{session_id}/turns", turn)).status_code == 200
        ended = await self.post(f"/sessions/{session_id}/end")
        assert ended.json() == {"summarization": "scheduled"}
        return session_id

    async def join(self) -> None:
        await self.app.state.services.tasks.join()


@pytest_asyncio.fixture
async def api(engine: MemoryEngine, settings: Settings) -> AsyncIterator[Api]:
    quick = settings.model_copy(update={"min_session_seconds": 0.0})
    app = create_app(quick, engine=engine)
    token = app.state.services.keys.create(ACCOUNT)
    # Every request these tests make fails the test if its handler (or a task it spawned)
    # reads or writes the store on the event loop instead of off-loading it.
    guard = LoopGuard(engine.storage)
    transport = httpx.ASGITransport(app=guard.app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        yield Api(app, client, token)
        await app.state.services.tasks.join()
    assert guard.blocking == [], "storage work on the event loop:\n" + "\n".join(guard.blocking)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
