"""``confide mcp``: the memory tools through the official MCP SDK's own client.

Over stdio the server is ``confide mcp`` in a subprocess (SQLite); over streamable HTTP it is
the same server on a loopback socket, over both backends, with the REST service's bearer
API keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent, TextResourceContents

from confide.cli import main
from confide.client import DEFAULT_ACCOUNT, Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.mcp_server import McpScope, create_mcp_server, mcp_http_app, open_services
from confide.server.services import Services
from confide.testing.loopback import serve_on_loopback
from confide.types import MemoryFilter

TOOLS = {
    "store_memory",
    "update_memory",
    "forget_memory",
    "mark_private",
    "memory_query",
    "memory_history",
}
SRC = Path(__file__).resolve().parents[2] / "src"


def _data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def _error(result: CallToolResult) -> str:
    assert result.is_error
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


async def _exercise_every_tool(client: Client, *, user: dict[str, str]) -> None:
    """Call each tool once with good arguments and check what it did."""
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    # Declared as the HTTP tool bodies spell the arguments; snake_case is accepted too.
    schemas = {t.name: t.input_schema for t in listed.tools}
    assert schemas["update_memory"]["required"] == ["existingKey", "newValue"]
    assert set(schemas["forget_memory"]["properties"]) == {"key", "memoryId", "userId"}
    stored = _data(
        await client.call_tool(
            "store_memory", {"memory_type": "fact", "key": "home_town", "value": "Portland", **user}
        )
    )
    assert stored["action"] == "created"
    again = _data(
        await client.call_tool(
            "store_memory", {"memory_type": "fact", "key": "home_town", "value": "Portland", **user}
        )
    )
    assert again == {"success": True, "memoryId": stored["memoryId"], "action": "unchanged"}
    updated = _data(
        await client.call_tool(
            "update_memory", {"existingKey": "HOME_TOWN", "newValue": "Tucson", **user}
        )
    )
    assert updated["action"] == "updated" and updated["memoryId"] != stored["memoryId"]
    found = _data(await client.call_tool("memory_query", {"query": "Tucson", **user}))
    assert [r["id"] for r in found["results"]] == [updated["memoryId"]]
    assert "Tucson" in found["results"][0]["text"]
    history = _data(await client.call_tool("memory_history", {"key": "home_town", **user}))
    assert [e["event"] for e in history["history"]][:2] == ["UPDATE", "ADD"]
    assert "Tucson" not in json.dumps(history) and "Portland" not in json.dumps(history)
    private = _data(await client.call_tool("mark_private", {"key": "home_town", **user}))
    assert private["action"] == "private"
    _data(
        await client.call_tool(
            "store_memory", {"memory_type": "preference", "key": "likes", "value": "jazz", **user}
        )
    )
    forgotten = _data(await client.call_tool("forget_memory", {"key": "likes", **user}))
    assert forgotten["action"] == "forgotten"


async def _check_errors(client: Client, *, user: dict[str, str]) -> None:
    """The dispatcher's errors, as tool errors naming the error class and the field."""
    bad_type = _error(
        await client.call_tool(
            "store_memory", {"memory_type": "gossip", "key": "k", "value": "v", **user}
        )
    )
    assert bad_type.startswith(
        "ValidationError: store_memory: invalid arguments: memory_type: Input should be 'fact'"
    )
    assert "gossip" not in bad_type and "pydantic" not in bad_type
    # The SDK validates nothing itself: a missing or mistyped argument is the tool's error.
    no_value = _error(await client.call_tool("store_memory", {"memoryType": "fact", **user}))
    assert no_value == (
        "ValidationError: store_memory: invalid arguments: key: Field required; "
        "value: Field required"
    )
    bad_top = _error(await client.call_tool("memory_query", {"query": "x", "topK": "lots", **user}))
    assert bad_top.startswith("ValidationError: memory_query: invalid arguments: topK: Input")
    assert "lots" not in bad_top and "https://" not in bad_top
    missing = _error(await client.call_tool("forget_memory", {"key": "no_such_key", **user}))
    assert missing == "NotFoundError: no active memory has this key"
    neither = _error(await client.call_tool("mark_private", {**user}))
    assert neither == "ValidationError: mark_private: invalid arguments: give key or memoryId"
    unknown = _error(await client.call_tool("no_such_tool", {**user}))
    assert unknown == "ValidationError: unknown tool 'no_such_tool'"
    other_id = _error(await client.call_tool("memory_history", {"memoryId": "nope-123", **user}))
    assert other_id.startswith("NotFoundError")


# ---- stdio: `confide mcp` as a subprocess -----------------------------------------------------


def _stdio(home: Path, *args: str) -> StdioServerParameters:
    env = {
        "CONFIDE_HOME": str(home),
        "MEMORY_ENCRYPTION_KEY": bytes(range(32)).hex(),
        "CONFIDE_EMBEDDER": "none",
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "confide.cli", "mcp", *args], env=env
    )


@pytest.mark.asyncio
async def test_stdio_serves_every_tool_for_the_configured_user(tmp_path: Path) -> None:
    params = _stdio(tmp_path / "home", "--account", "acme", "--user", "ann")
    async with Client(params) as client:
        await _exercise_every_tool(client, user={})
        await _check_errors(client, user={})
        refused = _error(
            await client.call_tool("forget_memory", {"key": "home_town", "user_id": "bob"})
        )
        assert refused == "PermissionDeniedError: this caller acts for another user"
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [
            "confide://users/{user_id}/memories"
        ]
        read = await client.read_resource("confide://users/ann/memories")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        document = json.loads(content.text)
        assert [(m["key"], m["value"]) for m in document["memories"]] == [("home_town", "Tucson")]


@pytest.mark.asyncio
async def test_stdio_without_a_user_takes_user_id_and_requires_it(tmp_path: Path) -> None:
    async with Client(_stdio(tmp_path / "home", "--account", "acme")) as client:
        no_user = _error(
            await client.call_tool(
                "store_memory", {"memory_type": "fact", "key": "k", "value": "v"}
            )
        )
        assert "ValidationError: user_id is required" in no_user
        _data(
            await client.call_tool(
                "store_memory",
                {"memory_type": "fact", "key": "pet", "value": "a cat", "user_id": "cy"},
            )
        )
        read = await client.read_resource("confide://users/cy/memories")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        assert [m["key"] for m in json.loads(content.text)["memories"]] == ["pet"]
        other = await client.read_resource("confide://users/dee/memories")
        other_content = other.contents[0]
        assert isinstance(other_content, TextResourceContents)
        assert json.loads(other_content.text)["memories"] == []


# ---- streamable HTTP with bearer API keys ------------------------------------------------------


@dataclass
class HttpServer:
    url: str
    services: Services

    def key(self, account: str, *agents: str) -> str:
        return self.services.keys.create(account, agents=agents)

    @asynccontextmanager
    async def client(self, token: str) -> AsyncIterator[Client]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            yield client


@pytest.fixture
def http_server(engine: MemoryEngine, settings: Settings) -> Iterator[HttpServer]:
    confide = Confide(engine, embedder=None, settings=settings)
    services = open_services(confide)
    server = create_mcp_server(services, McpScope(), http=True)
    try:
        with serve_on_loopback(mcp_http_app(server)) as base:
            yield HttpServer(f"{base}/mcp", services)
    finally:
        services.close()
        confide.access.close()


@pytest.mark.asyncio
async def test_http_serves_every_tool_with_a_bearer_key(http_server: HttpServer) -> None:
    token = http_server.key("acme")
    async with http_server.client(token) as client:
        await _exercise_every_tool(client, user={"userId": "ann"})
        await _check_errors(client, user={"user_id": "ann"})
        read = await client.read_resource("confide://users/ann/memories")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        assert [m["value"] for m in json.loads(content.text)["memories"]] == ["Tucson"]


@pytest.mark.asyncio
async def test_http_scopes_each_call_to_the_keys_account(http_server: HttpServer) -> None:
    async with http_server.client(http_server.key("acme")) as client:
        stored = _data(
            await client.call_tool(
                "store_memory",
                {"memory_type": "fact", "key": "home_town", "value": "Oslo", "user_id": "ann"},
            )
        )
    # Same user id in another account: nothing to see, nothing to touch.
    async with http_server.client(http_server.key("globex")) as client:
        read = await client.read_resource("confide://users/ann/memories")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        assert json.loads(content.text)["memories"] == []
        missing = _error(
            await client.call_tool(
                "forget_memory", {"memory_id": stored["memoryId"], "user_id": "ann"}
            )
        )
        assert "NotFoundError" in missing


@pytest.mark.asyncio
async def test_http_a_read_key_queries_and_writes_nothing(http_server: HttpServer) -> None:
    async with http_server.client(http_server.key("acme")) as client:
        stored = _data(
            await client.call_tool(
                "store_memory",
                {"memory_type": "fact", "key": "home_town", "value": "Oslo", "user_id": "ann"},
            )
        )
    read_only = http_server.services.keys.create("acme", scope="read")
    async with http_server.client(read_only) as client:
        for name, arguments in (
            ("forget_memory", {"memory_id": stored["memoryId"]}),
            ("mark_private", {"key": "home_town"}),
            ("update_memory", {"existing_key": "home_town", "new_value": "Bergen"}),
            ("store_memory", {"memory_type": "fact", "key": "pet", "value": "a cat"}),
        ):
            refused = _error(await client.call_tool(name, {**arguments, "user_id": "ann"}))
            assert refused == (
                f"PermissionDeniedError: {name} needs an API key with the service scope"
            )
        answer = _data(
            await client.call_tool("memory_query", {"query": "home town", "user_id": "ann"})
        )
        assert answer["success"] is True
    [memory] = http_server.services.engine.list_memories(
        MemoryFilter(account_id="acme", user_id="ann")
    )
    assert (memory.id, memory.value, memory.visibility.value) == (
        stored["memoryId"],
        "Oslo",
        "private",
    )


@pytest.mark.asyncio
async def test_http_agent_must_be_one_the_key_is_bound_to(http_server: HttpServer) -> None:
    async with http_server.client(http_server.key("acme", "nurse")) as client:
        refused = _error(
            await client.call_tool(
                "memory_query", {"query": "home_town", "agent": "default", "user_id": "ann"}
            )
        )
        assert "PermissionDeniedError: API key may not act as agent 'default'" in refused
        # Naming no agent acts as the key's first one (which has no allowlist here).
        first = _error(
            await client.call_tool("memory_query", {"query": "home_town", "user_id": "ann"})
        )
        assert "PermissionDeniedError: agent 'nurse' has no category allowlist" in first
    async with http_server.client(http_server.key("acme", "nurse", "default")) as client:
        answer = _data(
            await client.call_tool(
                "memory_query", {"query": "home_town", "agent": "default", "user_id": "ann"}
            )
        )
        assert answer["results"] == []


@pytest.mark.asyncio
async def test_http_refuses_requests_without_a_valid_key(http_server: HttpServer) -> None:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    token = http_server.key("acme")
    http_server.services.keys.revoke(token.split("_")[1])
    async with httpx.AsyncClient() as raw:
        for auth in (
            {},
            {"Authorization": "Bearer cfk_nope_nope"},
            {"Authorization": f"Bearer {token}"},
        ):
            response = await raw.post(http_server.url, json=hello, headers={**headers, **auth})
            assert response.status_code == 401, auth.keys()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.asyncio
async def test_confide_mcp_http_command_serves_with_keys(tmp_path: Path) -> None:
    home = tmp_path / "home"
    params = _stdio(home, "--http", "--port", str(port := _free_port()))
    env = {**os.environ, **(params.env or {})}
    created = subprocess.run(
        [sys.executable, "-m", "confide.cli", "keys", "create", "--account", "acme"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    token = created.stdout.strip()
    process = subprocess.Popen([params.command, *params.args], env=env, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient() as raw:
            for _ in range(600):  # readiness: the endpoint answers (401 without a key)
                try:
                    if (await raw.post(url, json={})).status_code == 401:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("confide mcp --http did not start")
        server = HttpServer(url, services=None)  # type: ignore[arg-type]
        async with server.client(token) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            stored = _data(
                await client.call_tool(
                    "store_memory",
                    {"memory_type": "fact", "key": "home_town", "value": "Oslo", "user_id": "ann"},
                )
            )
            assert stored["action"] == "created"
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_confide_mcp_has_help_naming_the_default_account() -> None:
    help_text = CliRunner().invoke(main, ["mcp", "--help"]).output
    assert "--http" in help_text and "--port" in help_text and "--account" in help_text
    assert f"[default: ({DEFAULT_ACCOUNT} over stdio)]" in " ".join(help_text.split())


@pytest.mark.asyncio
async def test_stdio_without_an_account_acts_in_the_sdks_default_account(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with Client(_stdio(home, "--user", "ann")) as client:
        _data(
            await client.call_tool(
                "store_memory", {"memory_type": "fact", "key": "pet", "value": "a cat"}
            )
        )
    settings = Settings(home=home, encryption_key=bytes(range(32)).hex(), embedder="none")
    with MemoryEngine.open(settings) as engine:
        memories = engine.list_memories(MemoryFilter(account_id=DEFAULT_ACCOUNT, user_id="ann"))
    assert [m.key for m in memories] == ["pet"]
