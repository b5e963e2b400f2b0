"""API keys: listing and revocation through the CLI, and keys bound to agents, on both backends.

The CLI runs through click's runner against the very database the app serves (SQLite file or
PostgreSQL database), as an operator's ``confide keys ...`` would beside a running server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from click.testing import CliRunner
from fastapi import FastAPI
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from confide.cli import main
from confide.config import Settings
from confide.conversation.query_handler import RetrievalQueryHandler
from confide.engine import MemoryEngine
from confide.retrieval.categories import CategoriesConfig
from confide.retrieval.memory_query import MemoryQueryService
from confide.server import create_app
from confide.server.auth import ApiKeys
from confide.storage.base import Storage

ACCOUNT = "acct-k"
USER = "user-1"
CATEGORIES = {
    "categories": {
        "system": {"fact": {"context": "all"}},
        "custom": {"clinical": {"context": "all"}},
    },
    "allowlists": {
        "default": ["fact"],
        "planner": ["fact"],
        "clinician": ["fact", "clinical"],
    },
}


@pytest.fixture
def cli(storage: Storage, storage_url: str, tmp_path: Path) -> Iterator[CliRunner]:
    """A runner whose ``confide`` opens the test's database (and no encryption key)."""
    env = {
        "CONFIDE_STORAGE_URL": storage_url,
        "CONFIDE_HOME": str(tmp_path / "cli-home"),
        "MEMORY_ENCRYPTION_KEY": None,  # key commands need none
    }
    yield CliRunner(env=env)


def run(cli: CliRunner, *args: str) -> tuple[int, str, str]:
    result = cli.invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def app(engine: MemoryEngine, settings: Settings) -> FastAPI:
    """The service with ``memory_query`` over categories that only ``clinician`` may read."""
    engine.store(
        {"account_id": ACCOUNT, "user_id": USER, "key": "diagnosis", "value": "Type 2 diabetes",
         "category": "clinical"}
    )  # fmt: skip
    engine.store(
        {"account_id": ACCOUNT, "user_id": USER, "key": "city", "value": "Lisbon",
         "category": "fact"}
    )  # fmt: skip
    service = MemoryQueryService(engine, CategoriesConfig.model_validate(CATEGORIES), embedder=None)
    return create_app(settings, engine=engine, query=RetrievalQueryHandler(service))


@pytest_asyncio.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://confide.test") as client:
        yield client


def create_key(cli: CliRunner, *agents: str) -> str:
    options = [arg for agent in agents for arg in ("--agent", agent)]
    code, out, err = run(cli, "keys", "create", "--account", ACCOUNT, *options)
    assert code == 0, err
    assert out.count("\n") == 1 and out.startswith("cfk_")  # the token alone
    return out.strip()


def key_id(token: str) -> str:
    return token.split("_", 2)[1]


async def query(http: httpx.AsyncClient, token: str, agent: str | None = None) -> httpx.Response:
    body: dict[str, object] = {"user_id": USER, "query": "what do you know", "top_k": 5}
    if agent is not None:
        body["agent"] = agent
    return await http.post(
        "/v1/memory_query", json=body, headers={"Authorization": f"Bearer {token}"}
    )


def values(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {r["text"] for r in response.json()["results"]}


# ---- list and revoke --------------------------------------------------------------------------
def test_list_shows_keys_and_their_agents_without_secrets(cli: CliRunner, app: FastAPI) -> None:
    plain = create_key(cli)
    bound = create_key(cli, "planner", "clinician")
    other = app.state.services.keys.create("acct-other")
    code, out, _ = run(cli, "keys", "list", "--account", ACCOUNT)
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [key_id(plain), key_id(bound)]
    assert lines[0].endswith("active  agents default (unbound)")
    assert lines[1].endswith("active  agents planner,clinician")
    assert " created 20" in lines[0]
    tables = app.state.services.tables
    for token in (plain, bound):
        secret = token.split("_", 2)[2]
        assert secret not in out
        assert tables.get_api_key(key_id(token)).token_hash not in out
    assert key_id(other) not in out


@pytest.mark.asyncio
async def test_revoke_refuses_the_key_at_once_in_a_running_app(
    cli: CliRunner, http: httpx.AsyncClient
) -> None:
    token = create_key(cli)
    kept = create_key(cli)
    listing = {"Authorization": f"Bearer {token}"}
    assert (await http.get("/v1/memories", params={"user_id": USER}, headers=listing)).is_success
    code, out, _ = run(cli, "keys", "revoke", key_id(token))
    assert code == 0 and key_id(token) in out
    refused = await http.get("/v1/memories", params={"user_id": USER}, headers=listing)
    assert refused.status_code == 401
    assert refused.json() == {
        "success": False,
        "error": "Invalid API key",
        "type": "PermissionDeniedError",
    }
    assert (await query(http, kept)).status_code == 200  # other keys keep working
    lines = run(cli, "keys", "list", "--account", ACCOUNT)[1].splitlines()
    assert " revoked 20" in lines[0] and " active " in lines[1]
    assert run(cli, "keys", "revoke", key_id(token))[0] == 0  # revoking again is harmless


def test_revoking_an_unknown_key_fails_clearly(cli: CliRunner) -> None:
    create_key(cli)
    code, out, err = run(cli, "keys", "revoke", "0123456789abcdef")
    assert code == 1 and out == ""
    assert err.strip() == "error: API key 0123456789abcdef not found"


# ---- agents bound to keys ---------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_key_for_planner_cannot_query_as_clinician(
    cli: CliRunner, http: httpx.AsyncClient
) -> None:
    token = create_key(cli, "planner")
    denied = await query(http, token, "clinician")
    assert denied.status_code == 403
    assert denied.json() == {
        "success": False,
        "error": "API key may not act as agent 'clinician'",
        "type": "PermissionDeniedError",
    }
    assert values(await query(http, token, "planner")) == {"[fact] city: Lisbon"}
    assert values(await query(http, token)) == {"[fact] city: Lisbon"}  # its first agent
    assert (await query(http, token, "default")).status_code == 403


@pytest.mark.asyncio
async def test_a_key_without_agents_acts_as_default_only(
    cli: CliRunner, http: httpx.AsyncClient
) -> None:
    token = create_key(cli)
    denied = await query(http, token, "clinician")
    assert denied.status_code == 403 and "'clinician'" in denied.json()["error"]
    assert values(await query(http, token, "default")) == {"[fact] city: Lisbon"}
    assert values(await query(http, token)) == {"[fact] city: Lisbon"}


@pytest.mark.asyncio
async def test_a_key_with_several_agents_may_act_as_each(
    cli: CliRunner, http: httpx.AsyncClient
) -> None:
    token = create_key(cli, "clinician", "planner")
    assert values(await query(http, token, "planner")) == {"[fact] city: Lisbon"}
    assert values(await query(http, token)) == {
        "[fact] city: Lisbon",
        "[clinical] diagnosis: Type 2 diabetes",
    }
    assert (await query(http, token, "default")).status_code == 403


def test_keys_made_before_migration_7_act_as_default(storage: Storage) -> None:
    keys = ApiKeys.over(storage)
    token = keys.create(ACCOUNT)
    with storage.transaction() as tx:  # as a store from before version 7 left it
        tx.run("DROP TABLE api_key_agents")
        tx.run("DELETE FROM schema_migrations WHERE version = 7")
    storage.migrate()
    with storage.transaction() as tx:  # a half-recorded run repeats safely
        tx.run("DELETE FROM schema_migrations WHERE version = 7")
    storage.migrate()
    old = keys.verify(token)
    assert old is not None and old.agents == () and old.agent_for(None) == "default"
    bound = keys.verify(keys.create(ACCOUNT, agents=["planner", "planner", "clinician"]))
    assert bound is not None and bound.agents == ("planner", "clinician")


def test_create_refuses_a_malformed_agent_name(cli: CliRunner) -> None:
    code, out, err = run(cli, "keys", "create", "--account", ACCOUNT, "--agent", " ")
    assert code == 2 and out == "" and "agent names" in err
    assert run(cli, "keys", "list", "--account", ACCOUNT)[1] == ""


def test_key_commands_have_help(cli: CliRunner) -> None:
    for command in ("create", "list", "revoke"):
        code, out, _ = run(cli, "keys", command, "--help")
        assert code == 0 and "Usage" in out and len(out) > 120, command
    assert "--agent" in run(cli, "keys", "create", "--help")[1]


# ---- the realtime socket ----------------------------------------------------------------------
def memory_query_call(call_id: str, arguments: dict[str, object]) -> str:
    return json.dumps(
        {
            "type": "response.function_call_arguments.done",
            "call_id": call_id,
            "name": "memory_query",
            "arguments": json.dumps(arguments),
        }
    )


def tool_output(events: list[str]) -> dict[str, object]:
    created = json.loads(events[0])
    assert created["type"] == "conversation.item.create"
    output: dict[str, object] = json.loads(created["item"]["output"])
    return output


def test_the_realtime_socket_holds_tool_calls_to_the_key(cli: CliRunner, app: FastAPI) -> None:
    token = create_key(cli, "planner")
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as client:
        sid = client.post(
            "/sessions", json={"accountId": ACCOUNT, "lineId": USER}, headers=auth
        ).json()["callSessionId"]
        with client.websocket_connect(f"/sessions/{sid}/realtime", headers=auth) as socket:
            assert socket.receive_json()["type"] == "session.update"
            socket.send_text(memory_query_call("c1", {"query": "health", "agent": "clinician"}))
            denied = tool_output([socket.receive_text(), socket.receive_text()])
            assert denied == {
                "success": False,
                "error": "API key may not act as agent 'clinician'",
                "type": "PermissionDeniedError",
            }
            socket.send_text(memory_query_call("c2", {"query": "health", "top_k": 5}))
            allowed = tool_output([socket.receive_text(), socket.receive_text()])
            results = allowed["results"]
            assert allowed["success"] is True and isinstance(results, list)
            assert [r["text"] for r in results] == ["[fact] city: Lisbon"]

            assert run(cli, "keys", "revoke", key_id(token))[0] == 0
            socket.send_text(memory_query_call("c3", {"query": "health"}))
            revoked = tool_output([socket.receive_text(), socket.receive_text()])
            assert revoked == {
                "success": False,
                "error": "API key is no longer valid",
                "type": "PermissionDeniedError",
            }
            # The socket closed after that answer: a further call gets no answer but the close
            # (were it still open, the call would be answered and receive_text would return).
            socket.send_text(memory_query_call("c4", {"query": "health"}))
            with pytest.raises(WebSocketDisconnect) as closed:
                socket.receive_text()
            assert closed.value.code == 1008
