"""One error contract across the doors: the same bad tool arguments get the same error class,
message, ``fields`` and ``allowed`` from the HTTP tool routes, MCP (in process, as over stdio,
and over its streamable-HTTP app with a bearer key) and the Realtime adapter's function
output, on both backends."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent
from tests.server.conftest import ACCOUNT, Api

from confide.errors import error_named, http_status_of
from confide.mcp_server import McpScope, create_mcp_server, mcp_http_app
from confide.server.routes.realtime import KeyBoundDispatcher
from confide.server.services import Services
from confide.testing.loopback import serve_on_loopback
from confide.types import MemoryType

pytestmark = pytest.mark.asyncio

LINE = "line-1"
TYPES = [t.value for t in MemoryType]
ONE_OF = "Input should be " + ", ".join(f"'{t}'" for t in TYPES[:-1]) + f" or '{TYPES[-1]}'"


@dataclass(frozen=True)
class Answer:
    """What a door said about a failed call."""

    type: str
    error: str
    fields: list[str] = field(default_factory=list)
    allowed: dict[str, list[str]] = field(default_factory=dict)


def _answer(body: dict[str, Any]) -> Answer:
    """A door's JSON answer, read leniently (the test compares them all at the end)."""
    kind, error = str(body.get("type")), str(body.get("error"))
    return Answer(kind, error, body.get("fields", []), body.get("allowed", {}))


CASES: list[tuple[str, str, dict[str, Any], Answer]] = [
    (
        "missing-value",
        "store_memory",
        {"memoryType": "fact", "key": "city"},
        Answer(
            "ValidationError", "store_memory: invalid arguments: value: Field required",
            ["value"],
        ),
    ),
    (
        "missing-new-value",
        "update_memory",
        {"existingKey": "city"},
        Answer(
            "ValidationError", "update_memory: invalid arguments: newValue: Field required",
            ["newValue"],
        ),
    ),
    (
        "bad-memory-type",
        "store_memory",
        {"memoryType": "gossip", "key": "city", "value": "Oslo"},
        Answer(
            "ValidationError", f"store_memory: invalid arguments: memoryType: {ONE_OF}",
            ["memoryType"], {"memoryType": TYPES},
        ),
    ),
    (
        "bad-memory-type-snake-case",
        "update_memory",
        {"existing_key": "city", "new_value": "Oslo", "memory_type": "gossip"},
        Answer(
            "ValidationError", f"update_memory: invalid arguments: memory_type: {ONE_OF}",
            ["memory_type"], {"memory_type": TYPES},
        ),
    ),
    (
        "unknown-tool",
        "no_such_tool",
        {"key": "city"},
        Answer("ValidationError", "unknown tool 'no_such_tool'"),
    ),
    (
        "empty-forget",
        "forget_memory",
        {},
        Answer(
            "ValidationError", "forget_memory: invalid arguments: give key or memoryId",
            ["key", "memoryId"],
        ),
    ),
    (
        "blank-mark-private",
        "mark_private",
        {"key": " "},
        Answer(
            "ValidationError", "mark_private: invalid arguments: give key or memoryId",
            ["key", "memoryId"],
        ),
    ),
    (
        "empty-history",
        "memory_history",
        {},
        Answer(
            "ValidationError", "memory_history: invalid arguments: give key or memoryId",
            ["key", "memoryId"],
        ),
    ),
    (
        "query-names-another-user-in-its-filters",
        "memory_query",
        {"query": "city", "filters": {"user_id": "someone-else"}},
        Answer(
            "ValidationError", "user_id and filters.user_id name different users",
            ["user_id", "filters.user_id"],
        ),
    ),
    (
        "no-such-memory",
        "forget_memory",
        {"key": "no_such_key"},
        Answer("NotFoundError", "no active memory has this key"),
    ),
]  # fmt: skip

Door = Callable[[str, dict[str, Any]], Awaitable[Answer]]


@asynccontextmanager
async def _doors(api: Api) -> AsyncIterator[dict[str, Door]]:
    """Each door, ready to make one tool call for ``LINE`` in ``ACCOUNT``."""
    services: Services = api.app.state.services
    sid = await api.session(LINE)

    async def http_tool_route(name: str, arguments: dict[str, Any]) -> Answer:
        body = {"callSessionId": sid, "lineId": LINE, "accountId": ACCOUNT, **arguments}
        response = await api.post(f"/tools/{name}", body)
        answer = _answer(response.json())
        kind = error_named(answer.type)
        # The status is the one the tree's table gives the class.
        if kind is None or response.status_code != http_status_of(kind):
            return Answer(f"status {response.status_code}", answer.error)
        return answer

    row = services.session_of(sid, account_id=ACCOUNT)
    services.buffer_session(row)
    adapter = services.adapter(
        sid, dispatcher=KeyBoundDispatcher(services.gate, services.keys, api.token)
    )
    calls = itertools.count()

    async def realtime(name: str, arguments: dict[str, Any]) -> Answer:
        event = {
            "type": "response.function_call_arguments.done",
            "call_id": f"call-{next(calls)}",
            "name": name,
            "arguments": json.dumps(arguments),
        }
        [output, *_] = [json.loads(e) for e in await adapter.handle_json(json.dumps(event))]
        return _answer(json.loads(output["item"]["output"]))

    async def through(client: Client, name: str, arguments: dict[str, Any]) -> Answer:
        result = await client.call_tool(name, arguments)
        text = "".join(c.text for c in result.content if isinstance(c, TextContent))
        if not result.is_error or result.structured_content is None:
            return Answer("no structured error", text)
        answer = _answer(dict(result.structured_content))
        # The text the model reads is the same answer, in one line.
        return answer if text == f"{answer.type}: {answer.error}" else Answer("text", text)

    stdio = create_mcp_server(services, McpScope(account_id=ACCOUNT, user_id=LINE))
    over_http = create_mcp_server(services, McpScope(user_id=LINE), http=True)
    bearer = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api.token}"})
    with serve_on_loopback(mcp_http_app(over_http)) as base:
        async with (
            Client(stdio) as in_process,
            bearer,
            Client(streamable_http_client(f"{base}/mcp", http_client=bearer)) as remote,
        ):

            async def mcp_stdio(name: str, arguments: dict[str, Any]) -> Answer:
                return await through(in_process, name, arguments)

            async def mcp_http(name: str, arguments: dict[str, Any]) -> Answer:
                return await through(remote, name, arguments)

            yield {
                "http tool route": http_tool_route,
                "mcp (stdio)": mcp_stdio,
                "mcp (http)": mcp_http,
                "realtime": realtime,
            }


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [pytest.param(name, arguments, expected, id=case) for case, name, arguments, expected in CASES],
)
async def test_every_door_refuses_the_same_arguments_alike(
    api: Api, name: str, arguments: dict[str, Any], expected: Answer
) -> None:
    async with _doors(api) as doors:
        answers = {door: await call(name, arguments) for door, call in doors.items()}
    assert answers == dict.fromkeys(doors, expected)
    # Nothing of the validation library, and no value the caller sent, comes back.
    told = json.dumps([a.error for a in answers.values()])
    assert "pydantic" not in told and "http" not in told
    for value in ("Oslo", "gossip", "someone-else"):
        assert value not in told
