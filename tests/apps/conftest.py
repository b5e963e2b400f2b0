"""App-memory fixtures: the service over the parametrised ``engine`` with settings of the
test's choosing (an LLM at the scripted server), and the scripted server itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from confide.apps import AppMemories
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.server import create_app
from confide.testing.loop_guard import LoopGuard
from confide.testing.scripted_llm import ScriptedLLMServer

ACCOUNT = "acct-1"


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    """The scripted OpenAI-compatible server on loopback (replies enqueued by the test)."""
    with ScriptedLLMServer() as server:
        yield server


def llm_of(server: ScriptedLLMServer) -> OpenAICompatibleLLM:
    """A client of the scripted server over real HTTP."""
    return OpenAICompatibleLLM(base_url=server.base_url, model="scripted")


def transcript(n: int) -> list[dict[str, str]]:
    """A short conversation numbered ``n``."""
    return [
        {"role": "user", "content": f"I prefer option {n} for the report."},
        {"role": "assistant", "content": f"Noted, option {n}."},
    ]


@dataclass
class AppsApi:
    """An in-process client with a service key and an admin key for ``ACCOUNT``."""

    app: FastAPI
    client: httpx.AsyncClient
    token: str
    admin_token: str

    @property
    def apps(self) -> AppMemories:
        apps: AppMemories = self.app.state.services.apps
        return apps

    def headers(self, admin: bool = False) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token if admin else self.token}"}

    async def end(self, app_id: str, conversation: str, body: object) -> httpx.Response:
        return await self.client.post(
            f"/v1/apps/{app_id}/conversations/{conversation}/end", json=body, headers=self.headers()
        )

    async def join(self) -> None:
        """Wait for the request's background tasks, then run the jobs they queued."""
        services = self.app.state.services
        await services.tasks.join()
        await asyncio.to_thread(services.run_jobs)


ApiFactory = Callable[..., AbstractAsyncContextManager[AppsApi]]


@pytest.fixture
def apps_api(engine: MemoryEngine, settings: Settings) -> ApiFactory:
    """``async with apps_api(**settings_changes) as api``: the app over ``engine``."""

    @asynccontextmanager
    async def make(**changes: Any) -> AsyncIterator[AppsApi]:
        app = create_app(settings.model_copy(update=changes), engine=engine)
        keys = app.state.services.keys
        token = keys.create(ACCOUNT)
        admin = keys.create(ACCOUNT, admin=True)
        # A request whose handler (or a task it spawned) reads or writes the store on the
        # event loop fails the test.
        guard = LoopGuard(engine.storage)
        transport = httpx.ASGITransport(app=guard.app(app))
        async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as http:
            try:
                yield AppsApi(app, http, token, admin)
            finally:
                await app.state.services.tasks.join()
                await asyncio.to_thread(app.state.services.run_jobs)
        assert guard.blocking == [], "storage work on the event loop:\n" + "\n".join(guard.blocking)

    return make
