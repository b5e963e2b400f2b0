"""The loop guard the service tests run under: storage work on the event loop is caught."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from confide.engine import MemoryEngine
from confide.testing.loop_guard import LoopGuard
from confide.types import MemoryFilter

pytestmark = pytest.mark.asyncio


async def test_a_handler_reading_the_store_on_the_loop_is_caught(engine: MemoryEngine) -> None:
    app = FastAPI()
    flt = MemoryFilter(account_id="acct", user_id="u1")

    @app.get("/on-loop")
    async def on_loop() -> int:
        return len(engine.list_memories(flt, limit=5))

    @app.get("/off-loop")
    async def off_loop() -> int:
        return len(await asyncio.to_thread(engine.list_memories, flt, limit=5))

    @app.post("/write-on-loop")
    async def write_on_loop() -> str:
        stored = engine.store(
            {"account_id": "acct", "user_id": "u1", "key": "tea", "value": "green"}
        )
        return stored.id

    guard = LoopGuard(engine.storage)
    transport = httpx.ASGITransport(app=guard.app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://guard.test") as client:
        assert (await client.get("/off-loop")).status_code == 200
        assert guard.blocking == []
        assert (await client.get("/on-loop")).status_code == 200
        assert (await client.post("/write-on-loop")).status_code == 200
    assert {line.split(":", 1)[0] for line in guard.blocking} == {
        "GET /on-loop",
        "POST /write-on-loop",
    }
    caught = len(guard.blocking)
    # Outside a request (a test's own setup), the store may be used directly.
    engine.list_memories(flt, limit=1)
    assert len(guard.blocking) == caught
