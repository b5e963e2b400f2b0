"""Chat fixtures: the service over the parametrised ``engine``, with settings of the test's
choosing (an LLM at the scripted server, an embedder)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from confide.chat import ChatMemory
from confide.config import Settings
from confide.embedders.base import Embedder
from confide.engine import MemoryEngine
from confide.server import create_app
from confide.testing.loop_guard import LoopGuard

ACCOUNT = "acct-1"


@dataclass
class ChatApi:
    """An in-process client with a valid key for ``ACCOUNT``, and the app behind it."""

    app: FastAPI
    client: httpx.AsyncClient
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def chat(self) -> ChatMemory:
        chat: ChatMemory = self.app.state.services.chat
        return chat

    async def post(self, path: str, body: object = None) -> httpx.Response:
        return await self.client.post(path, json=body, headers=self.auth)

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(path, params=params, headers=self.auth)

    async def patch(self, path: str, body: object = None) -> httpx.Response:
        return await self.client.patch(path, json=body, headers=self.auth)

    async def delete(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.delete(path, params=params, headers=self.auth)

    async def say(
        self, conversation: str, user: str, content: str, *, role: str = "user", **extra: Any
    ) -> dict[str, Any]:
        body = {"user_id": user, "role": role, "content": content, **extra}
        response = await self.post(f"/v1/conversations/{conversation}/messages", body)
        assert response.status_code == 201, response.text
        saved: dict[str, Any] = response.json()
        return saved

    async def join(self) -> None:
        """Wait for the request's background tasks, then run the jobs they queued."""
        services = self.app.state.services
        await services.tasks.join()
        await asyncio.to_thread(services.run_jobs)


ApiFactory = Callable[..., AbstractAsyncContextManager[ChatApi]]


@pytest.fixture
def chat_api(engine: MemoryEngine, settings: Settings) -> ApiFactory:
    """``async with chat_api(**settings_changes) as api``: the app over ``engine`` (with
    ``embedder=`` for the vector tiers)."""

    @asynccontextmanager
    async def make(*, embedder: Embedder | None = None, **changes: Any) -> AsyncIterator[ChatApi]:
        app = create_app(settings.model_copy(update=changes), engine=engine, embedder=embedder)
        token = app.state.services.keys.create(ACCOUNT)
        # A request whose handler (or a task it spawned) reads or writes the store on the
        # event loop fails the test.
        guard = LoopGuard(engine.storage)
        transport = httpx.ASGITransport(app=guard.app(app))
        async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as http:
            try:
                yield ChatApi(app, http, token)
            finally:
                await app.state.services.tasks.join()
                await asyncio.to_thread(app.state.services.run_jobs)
        assert guard.blocking == [], "storage work on the event loop:\n" + "\n".join(guard.blocking)

    return make
