"""The MCP resource of a user's memories carries only what the caller's agent may read."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextResourceContents
from tests.conftest import SCRIBE_CATEGORIES

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.mcp_server import McpScope, create_mcp_server, mcp_http_app, open_services
from confide.testing.loopback import serve_on_loopback
from confide.types import MemoryType


@pytest.mark.asyncio
async def test_the_memories_resource_holds_the_agents_allowlist(
    engine: MemoryEngine, settings: Settings
) -> None:
    confide = Confide(
        engine,
        embedder=None,
        settings=settings.model_copy(update={"categories_file": SCRIBE_CATEGORIES}),
    )
    for key, value, kind in (
        ("home_town", "Porto", MemoryType.FACT),
        ("drink", "green tea", MemoryType.PREFERENCE),
        ("dentist", "call the dentist", MemoryType.FOLLOW_UP),
        ("mood", "lonely in the evenings", MemoryType.WELLBEING),
    ):
        engine.store(
            {"account_id": "acme", "user_id": "ann", "key": key, "value": value, "type": kind}
        )
    services = open_services(confide)
    scribe = services.keys.create("acme", agents=["scribe"])
    anyone = services.keys.create("acme")
    server = create_mcp_server(services, McpScope(), http=True)
    seen: dict[str, set[str]] = {}
    try:
        with serve_on_loopback(mcp_http_app(server)) as base:
            for name, token in (("scribe", scribe), ("default", anyone)):
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
                async with (
                    http,
                    Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
                ):
                    read = await client.read_resource("confide://users/ann/memories")
                content = read.contents[0]
                assert isinstance(content, TextResourceContents)
                seen[name] = {m["key"] for m in json.loads(content.text)["memories"]}
    finally:
        services.close()
    assert seen["scribe"] == {"home_town", "drink"}
    assert seen["default"] == {"home_town", "drink", "dentist", "mood"}
