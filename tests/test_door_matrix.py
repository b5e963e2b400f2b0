"""The door matrix: every operation through every door as every principal, on both backends.

One table says what each principal may do (:func:`expected`, written once per operation and
principal); one table says how each door performs each operation (:data:`ADAPTERS`, or an
:data:`ABSENT` entry naming why the door has no such operation). Every cell that exists runs
against SQLite and PostgreSQL, with fresh data of its own, and must give the answer the rules
give, whichever door it came through.

Principals: an ``admin``, a ``service`` and a ``read`` key of account A; an admin key of
another account (``other_account``: every id it names belongs to A, so A's data must look
absent and stay untouched); a service key of A bound to another agent (``other_agent``,
whose allowlist does not hold the seeded memory's category). MCP over stdio has no key: the
operator's configured account acts with the service scope (a server configured for another
account or agent stands for those principals). The embedded SDK is the process itself, admin
of the account it names (naming another account stands for ``other_account``); its other
principals are absent. The LangGraph store acts for the :class:`~confide.gate.Principal` it
is given, as a key would: every principal has its cells.

Reads and writes through an agent's view of a user (``view_*``: the LangGraph store, the MCP
memories resource) hold only what the agent's allowlist reaches, so for the other agent the
seeded fact is not there at all; reads that name no agent act as the principal's own.

Completeness: every public method of :class:`confide.gate.Gate`, every route of the service,
every MCP tool and resource maps to an operation, and every door has an entry (an adapter or
an absence) for every operation; a new door, route, tool or gate method without its row
fails :func:`test_the_table_covers_every_door_route_tool_and_gate_method`.

Cells that give the wrong answer today are listed in :data:`KNOWN_GAPS` (strict xfail): the
expectation stays what the rules say, the door is what needs fixing.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent, TextResourceContents
from tests.conftest import TEST_KEK, make_storage
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from confide.chat.facts import FACT_MEMORY_CATEGORY
from confide.client import Confide
from confide.config import Settings
from confide.conversation.extraction import ProposedChange
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.errors import (
    ConfideError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from confide.gate import Gate, Principal, Scope
from confide.langgraph.store import ConfideStore
from confide.mcp_server import McpScope, create_mcp_server, mcp_http_app, open_services
from confide.remote import AsyncRemoteConfide
from confide.server import create_app
from confide.server.services import Services
from confide.storage.base import Storage
from confide.storage.keystore import KeyStore, open_key_store
from confide.testing.loopback import serve_on_loopback
from confide.testing.postgres import EmbeddedPostgres, create_schema
from confide.types import MemoryFilter, MemoryState, MemoryType, NewMemory, Visibility

ACCOUNT = "acct-a"
OTHER = "acct-b"
AGENT = "default"
OTHER_AGENT = "planner"
SUBJECT = "maya"


class Op(StrEnum):
    """The operations of the matrix."""

    STORE = "store"
    UPDATE = "update"
    FORGET = "forget"
    RESTORE = "restore"
    MARK_PRIVATE = "mark_private"
    GET = "get"
    HISTORY = "history"
    LIST = "list"
    QUERY = "query"  # names no agent: acts as the principal's own, reads its allowlist
    QUERY_AS_AGENT = "query_as_agent"  # names agent "default"
    EXPORT = "export"
    ERASE = "erase"
    FACTS_READ = "facts_read"
    FACTS_WRITE = "facts_write"  # the owner shares or unshares a subject fact
    FACTS_DELETE = "facts_delete"  # the owner deletes a subject fact
    APP_READ = "app_read"  # the app's memories, listed
    APP_GET = "app_get"  # an app memory, by id
    APP_WRITE = "app_write"  # an app memory forgotten by id
    APP_CLEAR = "app_clear"  # every memory of the app forgotten
    APP_QUERY = "app_query"  # a query naming the app's owner as its user
    APP_EXPORT = "app_export"  # the export of the app's owner
    APP_CONTEXT = "app_context"  # the app's system message (agents read it)
    APP_END = "app_end"  # an app conversation ended (writes the app's memory)
    APP_CONFIGURE = "app_configure"
    APP_UNINSTALL = "app_uninstall"  # the app uninstalled (its memories kept)
    APP_OWNERS = "app_owners"  # the account's users listed: never the app's internal owner
    SESSION_OPEN = "session_open"  # a call session for a line of the account the body names
    SESSION_JOIN = "session_join"  # act on an existing call session by id
    CHAT_WRITE = "chat_write"  # a message saved
    CHAT_READ = "chat_read"  # the conversation's messages listed
    CHAT_RETRIEVE = "chat_retrieve"  # history with memory context; names no agent
    CHAT_RETRIEVE_AS_AGENT = "chat_retrieve_as_agent"  # names agent "default"
    CHAT_CONTEXT = "chat_context"  # the history's three tiers; names no agent
    CHAT_DELIVER = "chat_deliver"  # what to send agent "default"'s model this turn
    PROPOSALS_READ = "proposals_read"  # the user's pending consent proposals
    PROPOSAL_CONFIRM = "proposal_confirm"
    PROPOSAL_REJECT = "proposal_reject"
    USERS_LIST = "users_list"  # the ids of the account's users
    # Reads and writes through an agent's view of a user (Gate.agent_view): only what the
    # categories of the agent's allowlist hold is there at all.
    VIEW_GET = "view_get"  # the user's memory by key
    VIEW_LIST = "view_list"  # the user's memories, listed
    VIEW_PUT = "view_put"  # the memory the view holds, written again
    VIEW_DELETE = "view_delete"  # the memory the view holds, deleted


class Door(StrEnum):
    """Every way into Confide."""

    REST = "rest"
    TOOLS = "tools"
    REALTIME = "realtime"
    MCP_STDIO = "mcp_stdio"
    MCP_HTTP = "mcp_http"
    SDK = "sdk"
    REMOTE = "remote"
    LANGGRAPH = "langgraph"


class Who(StrEnum):
    """The principals."""

    ADMIN = "admin"
    SERVICE = "service"
    READ = "read"
    OTHER_ACCOUNT = "other_account"
    OTHER_AGENT = "other_agent"


class Out(StrEnum):
    """What a cell answered."""

    OK = "ok"
    EMPTY = "empty"  # answered, showing nothing of the seeded target
    DENIED = "denied"
    NOT_FOUND = "not_found"
    INVALID = "invalid"


# ---- the rules, once ------------------------------------------------------------------------

READS = frozenset({
    Op.GET, Op.HISTORY, Op.LIST, Op.QUERY, Op.QUERY_AS_AGENT, Op.EXPORT, Op.FACTS_READ,
    Op.APP_READ, Op.APP_GET, Op.APP_QUERY, Op.APP_EXPORT, Op.APP_CONTEXT, Op.APP_OWNERS,
    Op.CHAT_READ, Op.CHAT_RETRIEVE, Op.CHAT_RETRIEVE_AS_AGENT, Op.CHAT_CONTEXT,
    Op.CHAT_DELIVER, Op.PROPOSALS_READ, Op.USERS_LIST, Op.VIEW_GET, Op.VIEW_LIST,
})  # fmt: skip
"""Operations that change nothing: a ``read`` principal may call them."""

ADMIN_ONLY = frozenset({
    Op.ERASE, Op.APP_READ, Op.APP_GET, Op.APP_QUERY, Op.APP_EXPORT, Op.APP_WRITE,
    Op.APP_CLEAR, Op.APP_CONFIGURE, Op.APP_UNINSTALL,
})  # fmt: skip
"""Erasure, app memories (owner ``app:<id>``) and app settings are the operator's."""

OWN_AGENT_READS = frozenset({Op.QUERY, Op.CHAT_RETRIEVE, Op.CHAT_CONTEXT, Op.VIEW_LIST})
"""Reads that name no agent: they act as the principal's own and carry its allowlist."""

NAMES_AGENT = frozenset({Op.QUERY_AS_AGENT, Op.CHAT_RETRIEVE_AS_AGENT, Op.CHAT_DELIVER})
"""Operations that name agent ``default``: refused to a principal not bound to it."""

BY_KEY_IN_VIEW = frozenset({Op.VIEW_GET, Op.VIEW_PUT, Op.VIEW_DELETE})
"""Operations on one memory that the agent's view must hold: absent when it does not."""

OTHER_ACCOUNT = {
    # Ids of account A seen with another account's key: absent.
    **dict.fromkeys(
        (Op.UPDATE, Op.FORGET, Op.RESTORE, Op.MARK_PRIVATE, Op.GET, Op.HISTORY,
         Op.FACTS_WRITE, Op.FACTS_DELETE, Op.APP_GET, Op.APP_WRITE, Op.SESSION_JOIN,
         Op.PROPOSAL_CONFIRM, Op.PROPOSAL_REJECT, Op.VIEW_GET, Op.VIEW_PUT, Op.VIEW_DELETE),
        Out.NOT_FOUND,
    ),
    # Lists and searches of A's user or app in the other account: nothing of A.
    **dict.fromkeys(
        (Op.LIST, Op.QUERY, Op.QUERY_AS_AGENT, Op.EXPORT, Op.FACTS_READ, Op.APP_READ,
         Op.APP_QUERY, Op.APP_EXPORT, Op.APP_CONTEXT, Op.APP_OWNERS, Op.CHAT_READ,
         Op.CHAT_RETRIEVE, Op.CHAT_RETRIEVE_AS_AGENT, Op.CHAT_CONTEXT, Op.CHAT_DELIVER,
         Op.PROPOSALS_READ, Op.USERS_LIST, Op.VIEW_LIST),
        Out.EMPTY,
    ),
    # Writes that name a user, an app or a conversation land in the key's own account.
    **dict.fromkeys(
        (Op.STORE, Op.ERASE, Op.APP_END, Op.APP_CONFIGURE, Op.APP_CLEAR, Op.APP_UNINSTALL,
         Op.CHAT_WRITE),
        Out.OK,
    ),
    # A body naming account A.
    Op.SESSION_OPEN: Out.DENIED,
}  # fmt: skip


def expected(op: Op, who: Who, *, admin: bool = True) -> Out:
    """What the rules (docs/security.md, :mod:`confide.gate`) answer to ``who`` for ``op``.

    ``admin``: whether the other account's principal is an admin (its key is; MCP's stdio
    configured for it has the service scope).
    """
    if who is Who.OTHER_ACCOUNT:
        if op in ADMIN_ONLY and not admin:
            return Out.DENIED
        return OTHER_ACCOUNT[op]
    if op in ADMIN_ONLY and who is not Who.ADMIN:
        return Out.DENIED
    if op is Op.APP_OWNERS:
        return Out.EMPTY  # the users' list never shows an app's internal owner
    if op not in READS and who is Who.READ:
        return Out.DENIED
    if who is Who.OTHER_AGENT:
        if op in OWN_AGENT_READS:
            return Out.EMPTY  # its allowlist holds none of the seeded categories
        if op in BY_KEY_IN_VIEW:
            return Out.NOT_FOUND  # the fact is not in its view
        if op in NAMES_AGENT:
            return Out.DENIED  # names an agent the key is not bound to
    return Out.OK


# ---- the world: one service per backend ------------------------------------------------------


@dataclass
class World:
    """One backend's engine, service, MCP servers and keys, shared by every cell."""

    backend: str
    engine: MemoryEngine
    services: Services
    sdk: Confide
    base: str
    mcp_url: str
    tokens: dict[Who, str]
    mcp_stdio: dict[Who, Any]

    @property
    def ws(self) -> str:
        return self.base.replace("http://", "ws://")


@dataclass
class Seed:
    """Fresh data of account A for one cell."""

    user: str
    marker: str
    memory: str  # an active fact of the user, its value the marker
    key: str
    forgotten: str  # a forgotten memory of the user
    fact: str  # a subject fact the user owns
    app: str
    app_memory: str
    app_key: str
    conversation: str  # its one message (about SUBJECT) says ``said``, not the marker
    said: str
    session: str  # a call session of the user in account A ("": none made)
    proposal: str  # a pending proposal of the user, its value the marker ("": none made)


@dataclass
class Cell:
    """One cell's world, principal and data."""

    world: World
    who: Who
    seed: Seed
    sessions: dict[str, str] = field(default_factory=dict)

    @property
    def account(self) -> str:
        """The account the principal acts in."""
        return OTHER if self.who is Who.OTHER_ACCOUNT else ACCOUNT

    @property
    def token(self) -> str:
        return self.world.tokens[self.who]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def own_session(self) -> str:
        """A call session of the seeded user in the principal's account (tools, sockets)."""
        if self.account == ACCOUNT:
            return self.seed.session
        if self.account not in self.sessions:
            self.sessions[self.account] = self.world.services.start_session(
                account_id=self.account, user_id=self.seed.user, is_reminder=False
            )
        return self.sessions[self.account]


def _categories(tmp: Path) -> Path:
    """The shipped categories, plus an agent that may read preferences only and a profile
    for agent ``default`` (a delivery needs one)."""
    from importlib.resources import files

    shipped = files("confide.retrieval").joinpath("default_categories.yaml").read_text()
    path = tmp / "categories.yaml"
    path.write_text(
        shipped.rstrip()
        + f'\n  {OTHER_AGENT}: ["preference"]\n'
        + f"profiles:\n  {AGENT}:\n    identity: You are the assistant.\n"
    )
    return path


@pytest.fixture(scope="module", params=("sqlite", "postgres"))
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp(f"matrix-{request.param}")
    if request.param == "sqlite":
        url, keys_url = f"sqlite:///{tmp / 'confide.db'}", f"sqlite:///{tmp / 'keys.db'}"
    else:
        server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
        url = server.temporary_database(request, template="confide_template")
        keys_url = create_schema(request.getfixturevalue("keys_database"))
    storage: Storage = make_storage(url)
    key_store: KeyStore = open_key_store(keys_url)
    settings = Settings(
        home=tmp / "home",
        encryption_key=TEST_KEK.hex(),
        categories_file=_categories(tmp),
        min_session_seconds=0.0,
    )
    engine = MemoryEngine(
        storage, KeyRing(primary=TEST_KEK), settings=settings, key_store=key_store
    )
    app = create_app(settings, engine=engine)
    services: Services = app.state.services
    assert services.sdk is not None
    keys = services.keys
    tokens = {
        Who.ADMIN: keys.create(ACCOUNT, admin=True),
        Who.SERVICE: keys.create(ACCOUNT),
        Who.READ: keys.create(ACCOUNT, scope="read"),
        Who.OTHER_ACCOUNT: keys.create(OTHER, admin=True),
        Who.OTHER_AGENT: keys.create(ACCOUNT, agents=[OTHER_AGENT]),
    }
    stdio_services = open_services(services.sdk)
    http_services = open_services(services.sdk)
    mcp_stdio = {
        Who.SERVICE: create_mcp_server(stdio_services, McpScope(account_id=ACCOUNT)),
        Who.OTHER_ACCOUNT: create_mcp_server(stdio_services, McpScope(account_id=OTHER)),
        Who.OTHER_AGENT: create_mcp_server(
            stdio_services, McpScope(account_id=ACCOUNT, agent=OTHER_AGENT)
        ),
    }
    mcp_http = create_mcp_server(http_services, McpScope(), http=True)
    try:
        with serve_on_loopback(app) as base, serve_on_loopback(mcp_http_app(mcp_http)) as mcp:
            yield World(
                backend=request.param,
                engine=engine,
                services=services,
                sdk=services.sdk,
                base=base,
                mcp_url=f"{mcp}/mcp",
                tokens=tokens,
                mcp_stdio=mcp_stdio,
            )
    finally:
        stdio_services.close()
        http_services.close()
        engine.close()
        key_store.close()


def _seed(world: World, *, chat: bool, call: bool, proposal: bool) -> Seed:
    """A fresh user of account A with a memory, a forgotten one, a subject fact and an app
    memory; with ``chat`` a conversation, with ``call`` a call session, with ``proposal`` a
    pending proposal."""
    n = uuid.uuid4().hex[:10]
    user, app, marker, said = f"u-{n}", f"notes-{n}", f"zebra{n}", f"okapi{n}"
    engine = world.engine

    def store(**fields: Any) -> str:
        memory = engine.store(NewMemory(account_id=ACCOUNT, **fields), actor="seed")
        return memory.id

    memory = store(user_id=user, key=f"home_{n}", value=f"Lives in {marker}", type=MemoryType.FACT)
    forgotten = store(user_id=user, key=f"old_{n}", value=f"Once liked {marker}")
    engine.forget(forgotten, account_id=ACCOUNT, actor="seed")
    fact = store(
        user_id=user,
        key=f"fact_{n}",
        value=f"{SUBJECT} moved to {marker}",
        category=FACT_MEMORY_CATEGORY,
        subject_id=SUBJECT,
        metadata={"fact_category": "other"},
    )
    app_memory = store(user_id=f"app:{app}", app_id=app, key=f"units_{n}", value=f"{marker} units")
    conversation = f"c-{n}"
    if chat:
        world.sdk.add_message(
            account_id=ACCOUNT,
            user_id=user,
            conversation_id=conversation,
            role="user",
            content=f"Tell me about {said}.",
            subject_id=SUBJECT,  # a history of the conversation brings the subject's facts
        )
    session = ""
    if call:
        session = world.services.start_session(account_id=ACCOUNT, user_id=user, is_reminder=False)
    proposed = ""
    if proposal:
        change = ProposedChange(
            account_id=ACCOUNT,
            user_id=user,
            key=f"city_{n}",
            current_value=None,
            proposed_value=f"Moved to {marker}",
            type=MemoryType.FACT,
            confidence=0.9,
            session_id="seed",
        )
        proposed = world.services.proposals.file(change)
    return Seed(
        user=user,
        marker=marker,
        memory=memory,
        key=f"home_{n}",
        forgotten=forgotten,
        fact=fact,
        app=app,
        app_memory=app_memory,
        app_key=f"units_{n}",
        conversation=conversation,
        said=said,
        session=session,
        proposal=proposed,
    )


def _snapshot(world: World, seed: Seed) -> list[tuple[str, str, int, str]]:
    """Account A's seeded memories: ids, states, row versions, visibility."""
    rows = []
    for owner in (seed.user, f"app:{seed.app}"):
        flt = MemoryFilter(account_id=ACCOUNT, user_id=owner, states=tuple(MemoryState))
        for m in world.engine.list_memories(flt, limit=100):
            rows.append((m.id, m.state.value, m.row_version, m.visibility.value))
    return sorted(rows)


# ---- outcomes of each door -------------------------------------------------------------------


def _seen(cell: Cell, payload: object, needle: str | None = None) -> Out:
    """``ok`` when the answer shows ``needle`` (the seeded marker), ``empty`` when not.

    A ``memory_query`` answer counts by its results: its delta header lists the user's
    changes whatever the search found (it showed app memories a search left out).
    """
    if isinstance(payload, dict) and "header" in payload:
        payload = {k: v for k, v in payload.items() if k != "header"}
    found = (needle or cell.seed.marker) in json.dumps(payload, default=str)
    return Out.OK if found else Out.EMPTY


def _http(response: httpx.Response, cell: Cell | None = None, needle: str | None = None) -> Out:
    """A REST answer's outcome (``cell``: a read whose answer must show ``needle``, the
    marker by default)."""
    code = response.status_code
    if code in (401, 403):
        return Out.DENIED
    if code == 404:
        return Out.NOT_FOUND
    if 400 <= code < 500:
        return Out.INVALID
    assert code < 300, (code, response.text)
    if cell is not None:
        return _seen(cell, response.json(), needle)
    return Out.OK


def _error(exc: Exception) -> Out:
    if isinstance(exc, PermissionDeniedError):
        return Out.DENIED
    if isinstance(exc, NotFoundError):
        return Out.NOT_FOUND
    if isinstance(exc, ValidationError):
        return Out.INVALID
    raise exc


_ERROR_TYPES = {
    PermissionDeniedError.__name__: Out.DENIED,
    NotFoundError.__name__: Out.NOT_FOUND,
    ValidationError.__name__: Out.INVALID,
}


def _error_answer(answer: dict[str, Any]) -> Out:
    """A tool's error answer (``{success: false, error, type, ...}``: an MCP tool error's
    structured content, a Realtime output), by its ``type``."""
    assert answer.get("success") is False, answer
    kind = answer.get("type")
    assert kind in _ERROR_TYPES, answer
    return _ERROR_TYPES[kind]


def _error_text(text: str) -> Out:
    """An MCP resource error, which carries its message only."""
    if "PermissionDeniedError" in text or "may not" in text or "needs an API key" in text:
        return Out.DENIED
    if "NotFoundError" in text or "not found" in text:
        return Out.NOT_FOUND
    return Out.INVALID


def _tool_result(cell: Cell, op: Op, data: dict[str, Any]) -> Out:
    """A tool's answer: a read shows the marker or not; an update that had to create the
    memory did not find it."""
    if op is Op.UPDATE and data.get("action") == "created":
        return Out.NOT_FOUND
    if op in READS and op is not Op.HISTORY:
        return _seen(cell, data)
    return Out.OK


Adapter = Callable[[Cell], Awaitable[Out]]
ADAPTERS: dict[tuple[Op, Door], Adapter] = {}


def cell(op: Op, *doors: Door) -> Callable[[Adapter], Adapter]:
    """Register ``fn`` as how ``doors`` perform ``op``."""

    def register(fn: Adapter) -> Adapter:
        for door in doors:
            assert (op, door) not in ADAPTERS, (op, door)
            ADAPTERS[(op, door)] = fn
        return fn

    return register


# ---- REST --------------------------------------------------------------------------------------


@asynccontextmanager
async def _rest(c: Cell) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=c.world.base, headers=c.auth, timeout=30) as client:
        yield client


@cell(Op.STORE, Door.REST)
async def rest_store(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"user_id": c.seed.user, "key": "pet", "value": "a cat"}
        return _http(await http.post("/v1/memories", json=body))


@cell(Op.UPDATE, Door.REST)
async def rest_update(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.patch(f"/v1/memories/{c.seed.memory}", json={"value": "Oslo"}))


@cell(Op.FORGET, Door.REST)
async def rest_forget(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.delete(f"/v1/memories/{c.seed.memory}"))


@cell(Op.RESTORE, Door.REST)
async def rest_restore(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.post(f"/v1/memories/{c.seed.forgotten}/restore"))


@cell(Op.MARK_PRIVATE, Door.REST)
async def rest_mark_private(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"visibility": "shared"}
        return _http(await http.patch(f"/v1/memories/{c.seed.memory}", json=body))


@cell(Op.GET, Door.REST)
async def rest_get(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/v1/memories/{c.seed.memory}"), c)


@cell(Op.HISTORY, Door.REST)
async def rest_history(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/v1/memories/{c.seed.memory}/history"))


@cell(Op.LIST, Door.REST)
async def rest_list(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get("/v1/memories", params={"user_id": c.seed.user}), c)


@cell(Op.QUERY, Door.REST)
async def rest_query(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"user_id": c.seed.user, "query": c.seed.marker, "top_k": 10}
        return _http(await http.post("/v1/memory_query", json=body), c)


@cell(Op.QUERY_AS_AGENT, Door.REST)
async def rest_query_as_agent(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"user_id": c.seed.user, "query": c.seed.marker, "agent": AGENT}
        return _http(await http.post("/v1/search", json=body), c)


@cell(Op.EXPORT, Door.REST)
async def rest_export(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/v1/users/{c.seed.user}/export"), c)


@cell(Op.ERASE, Door.REST)
async def rest_erase(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.delete(f"/v1/users/{c.seed.user}"))


@cell(Op.FACTS_READ, Door.REST)
async def rest_facts_read(c: Cell) -> Out:
    async with _rest(c) as http:
        path = f"/v1/subjects/{SUBJECT}/facts"
        return _http(await http.get(path, params={"user_id": c.seed.user}), c)


@cell(Op.FACTS_WRITE, Door.REST)
async def rest_facts_write(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"user_id": c.seed.user, "visibility": "shared"}
        return _http(await http.patch(f"/v1/facts/{c.seed.fact}/visibility", json=body))


@cell(Op.APP_READ, Door.REST)
async def rest_app_read(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/apps/{c.seed.app}/memories"), c)


@cell(Op.APP_GET, Door.REST)
async def rest_app_get(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/v1/memories/{c.seed.app_memory}"), c)


@cell(Op.APP_QUERY, Door.REST)
async def rest_app_query(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"user_id": f"app:{c.seed.app}", "query": c.seed.marker, "top_k": 10}
        return _http(await http.post("/v1/memory_query", json=body), c)


@cell(Op.APP_EXPORT, Door.REST)
async def rest_app_export(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/v1/users/app:{c.seed.app}/export"), c)


@cell(Op.APP_WRITE, Door.REST)
async def rest_app_write(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.delete(f"/apps/{c.seed.app}/memories/{c.seed.app_memory}"))


@cell(Op.APP_CONTEXT, Door.REST)
async def rest_app_context(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get(f"/v1/apps/{c.seed.app}/context"), c)


@cell(Op.APP_END, Door.REST)
async def rest_app_end(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"messages": [{"role": "user", "content": "Use metric units."}]}
        path = f"/v1/apps/{c.seed.app}/conversations/conv-1/end"
        return _http(await http.post(path, json=body))


@cell(Op.APP_CONFIGURE, Door.REST)
async def rest_app_configure(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.put(f"/v1/apps/{c.seed.app}", json={"name": "Notes"}))


@cell(Op.APP_UNINSTALL, Door.REST)
async def rest_app_uninstall(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.delete(f"/v1/apps/{c.seed.app}"))


@cell(Op.SESSION_OPEN, Door.REST)
async def rest_session_open(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"accountId": ACCOUNT, "lineId": c.seed.user}
        return _http(await http.post("/sessions", json=body))


@cell(Op.SESSION_JOIN, Door.REST)
async def rest_session_join(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"speaker": "user", "text": "Hello."}
        return _http(await http.post(f"/sessions/{c.seed.session}/turns", json=body))


@cell(Op.CHAT_WRITE, Door.REST)
async def rest_chat_write(c: Cell) -> Out:
    async with _rest(c) as http:
        body = {"user_id": c.seed.user, "role": "user", "content": "Hello again."}
        path = f"/v1/conversations/{c.seed.conversation}/messages"
        return _http(await http.post(path, json=body))


@cell(Op.CHAT_READ, Door.REST)
async def rest_chat_read(c: Cell) -> Out:
    async with _rest(c) as http:
        path = f"/v1/conversations/{c.seed.conversation}/messages"
        return _http(await http.get(path, params={"user_id": c.seed.user}), c, c.seed.said)


async def _rest_retrieve(c: Cell, agent: str | None) -> Out:
    """The conversation's history: the marker only in the memory it brings as context."""
    body = {"user_id": c.seed.user, "input": f"Where does {c.seed.marker} live?"}
    if agent is not None:
        body["agent"] = agent
    async with _rest(c) as http:
        path = f"/v1/conversations/{c.seed.conversation}/retrieve"
        return _http(await http.post(path, json=body), c)


@cell(Op.CHAT_RETRIEVE, Door.REST)
async def rest_chat_retrieve(c: Cell) -> Out:
    return await _rest_retrieve(c, None)


@cell(Op.CHAT_RETRIEVE_AS_AGENT, Door.REST)
async def rest_chat_retrieve_as_agent(c: Cell) -> Out:
    return await _rest_retrieve(c, AGENT)


@cell(Op.CHAT_CONTEXT, Door.REST)
async def rest_chat_context(c: Cell) -> Out:
    body = {"user_id": c.seed.user, "input": f"Where does {c.seed.marker} live?"}
    async with _rest(c) as http:
        path = f"/v1/conversations/{c.seed.conversation}/memory_context"
        return _http(await http.post(path, json=body), c)


@cell(Op.CHAT_DELIVER, Door.REST)
async def rest_chat_deliver(c: Cell) -> Out:
    body = {
        "user_id": c.seed.user,
        "input": f"Where does {c.seed.marker} live?",
        "agent": AGENT,
        "subject_id": SUBJECT,
    }
    async with _rest(c) as http:
        path = f"/v1/conversations/{c.seed.conversation}/deliver"
        return _http(await http.post(path, json=body), c)


@cell(Op.FACTS_DELETE, Door.REST)
async def rest_facts_delete(c: Cell) -> Out:
    async with _rest(c) as http:
        path = f"/v1/facts/{c.seed.fact}"
        return _http(await http.delete(path, params={"user_id": c.seed.user}))


@cell(Op.APP_CLEAR, Door.REST)
async def rest_app_clear(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.delete(f"/apps/{c.seed.app}/memories"))


@cell(Op.PROPOSALS_READ, Door.REST)
async def rest_proposals_read(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get("/v1/proposals", params={"user_id": c.seed.user}), c)


@cell(Op.PROPOSAL_CONFIRM, Door.REST)
async def rest_proposal_confirm(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.post(f"/v1/proposals/{c.seed.proposal}/confirm"))


@cell(Op.PROPOSAL_REJECT, Door.REST)
async def rest_proposal_reject(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.post(f"/v1/proposals/{c.seed.proposal}/reject"))


@cell(Op.USERS_LIST, Door.REST)
async def rest_users_list(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get("/v1/users"), c, f'"{c.seed.user}"')


@cell(Op.APP_OWNERS, Door.REST)
async def rest_app_owners(c: Cell) -> Out:
    async with _rest(c) as http:
        return _http(await http.get("/v1/users"), c, f'"app:{c.seed.app}"')


# ---- tool routes -------------------------------------------------------------------------------


async def _tool_route(c: Cell, tool: str, body: dict[str, Any]) -> Out:
    call = {"callSessionId": c.own_session(), "lineId": c.seed.user, "accountId": c.account}
    async with _rest(c) as http:
        response = await http.post(f"/tools/{tool}", json={**call, **body})
    outcome = _http(response)
    if outcome is Out.OK:
        return _tool_result(c, _TOOL_OPS[tool], response.json())
    return outcome


@cell(Op.STORE, Door.TOOLS)
async def tools_store(c: Cell) -> Out:
    return await _tool_route(
        c, "store_memory", {"memoryType": "fact", "key": "pet", "value": "cat"}
    )


@cell(Op.UPDATE, Door.TOOLS)
async def tools_update(c: Cell) -> Out:
    return await _tool_route(c, "update_memory", {"existingKey": c.seed.key, "newValue": "Oslo"})


@cell(Op.FORGET, Door.TOOLS)
async def tools_forget(c: Cell) -> Out:
    return await _tool_route(c, "forget_memory", {"memoryId": c.seed.memory})


@cell(Op.MARK_PRIVATE, Door.TOOLS)
async def tools_mark_private(c: Cell) -> Out:
    return await _tool_route(c, "mark_private", {"memoryId": c.seed.memory})


@cell(Op.HISTORY, Door.TOOLS)
async def tools_history(c: Cell) -> Out:
    return await _tool_route(c, "memory_history", {"memoryId": c.seed.memory})


@cell(Op.QUERY, Door.TOOLS)
async def tools_query(c: Cell) -> Out:
    return await _tool_route(c, "memory_query", {"query": c.seed.marker, "topK": 10})


@cell(Op.QUERY_AS_AGENT, Door.TOOLS)
async def tools_query_as_agent(c: Cell) -> Out:
    return await _tool_route(c, "memory_query", {"query": c.seed.marker, "agent": AGENT})


# ---- Realtime socket ---------------------------------------------------------------------------


async def _socket(c: Cell, tool: str | None, arguments: dict[str, Any] | None = None) -> Out:
    """Open the call's socket; with ``tool``, call it once and read its output."""
    session = c.seed.session if tool is None else c.own_session()
    url = f"{c.world.ws}/sessions/{session}/realtime"
    try:
        async with connect(url, additional_headers=c.auth, open_timeout=30) as socket:
            assert json.loads(await socket.recv())["type"] == "session.update"
            if tool is None:
                return Out.OK
            event = {
                "type": "response.function_call_arguments.done",
                "call_id": "c1",
                "name": tool,
                "arguments": json.dumps(arguments or {}),
            }
            await socket.send(json.dumps(event))
            item = json.loads(await socket.recv())
    except InvalidStatus:
        return Out.DENIED  # the socket was refused before it was accepted
    assert item["type"] == "conversation.item.create", item
    result = json.loads(item["item"]["output"])
    if "error" in result:
        return _error_answer(result)
    return _tool_result(c, _TOOL_OPS[tool], result)


_TOOL_OPS = {
    "store_memory": Op.STORE,
    "update_memory": Op.UPDATE,
    "forget_memory": Op.FORGET,
    "mark_private": Op.MARK_PRIVATE,
    "memory_query": Op.QUERY,
    "memory_history": Op.HISTORY,
}


@cell(Op.STORE, Door.REALTIME)
async def socket_store(c: Cell) -> Out:
    args = {"memory_type": "fact", "key": "pet", "value": "a cat"}
    return await _socket(c, "store_memory", args)


@cell(Op.UPDATE, Door.REALTIME)
async def socket_update(c: Cell) -> Out:
    return await _socket(c, "update_memory", {"existing_key": c.seed.key, "new_value": "Oslo"})


@cell(Op.FORGET, Door.REALTIME)
async def socket_forget(c: Cell) -> Out:
    return await _socket(c, "forget_memory", {"memory_id": c.seed.memory})


@cell(Op.MARK_PRIVATE, Door.REALTIME)
async def socket_mark_private(c: Cell) -> Out:
    return await _socket(c, "mark_private", {"memory_id": c.seed.memory})


@cell(Op.HISTORY, Door.REALTIME)
async def socket_history(c: Cell) -> Out:
    return await _socket(c, "memory_history", {"memory_id": c.seed.memory})


@cell(Op.QUERY, Door.REALTIME)
async def socket_query(c: Cell) -> Out:
    return await _socket(c, "memory_query", {"query": c.seed.marker, "top_k": 10})


@cell(Op.QUERY_AS_AGENT, Door.REALTIME)
async def socket_query_as_agent(c: Cell) -> Out:
    return await _socket(c, "memory_query", {"query": c.seed.marker, "agent": AGENT})


@cell(Op.SESSION_JOIN, Door.REALTIME)
async def socket_join(c: Cell) -> Out:
    return await _socket(c, None)


# ---- MCP (stdio and HTTP) ----------------------------------------------------------------------


@asynccontextmanager
async def _mcp(c: Cell, door: Door) -> AsyncIterator[Client]:
    if door is Door.MCP_STDIO:
        async with Client(c.world.mcp_stdio[c.who]) as client:
            yield client
        return
    http = httpx2.AsyncClient(headers=c.auth)
    async with http, Client(streamable_http_client(c.world.mcp_url, http_client=http)) as client:
        yield client


async def _mcp_tool(c: Cell, door: Door, op: Op, tool: str, args: dict[str, Any]) -> Out:
    async with _mcp(c, door) as client:
        result: CallToolResult = await client.call_tool(tool, args)
    if result.is_error:
        first = result.content[0]
        assert isinstance(first, TextContent)
        assert result.structured_content is not None, first.text
        answer = dict(result.structured_content)
        assert first.text == f"{answer['type']}: {answer['error']}", (first.text, answer)
        return _error_answer(answer)
    assert result.structured_content is not None
    return _tool_result(c, op, dict(result.structured_content))


async def _mcp_resource(c: Cell, door: Door, owner: str) -> Out:
    async with _mcp(c, door) as client:
        try:
            read = await client.read_resource(f"confide://users/{owner}/memories")
        except Exception as exc:  # the MCP client raises its own error for a resource error
            return _error_text(str(exc))
    content = read.contents[0]
    assert isinstance(content, TextResourceContents)
    return _seen(c, json.loads(content.text))


def _mcp_cells(door: Door) -> None:
    """The MCP tools and the resource, registered for ``door``."""

    @cell(Op.STORE, door)
    async def store(c: Cell) -> Out:
        args = {"memory_type": "fact", "key": "pet", "value": "a cat", "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.STORE, "store_memory", args)

    @cell(Op.UPDATE, door)
    async def update(c: Cell) -> Out:
        args = {"existing_key": c.seed.key, "new_value": "Oslo", "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.UPDATE, "update_memory", args)

    @cell(Op.FORGET, door)
    async def forget(c: Cell) -> Out:
        args = {"memory_id": c.seed.memory, "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.FORGET, "forget_memory", args)

    @cell(Op.MARK_PRIVATE, door)
    async def mark_private(c: Cell) -> Out:
        args = {"memory_id": c.seed.memory, "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.MARK_PRIVATE, "mark_private", args)

    @cell(Op.HISTORY, door)
    async def history(c: Cell) -> Out:
        args = {"memory_id": c.seed.memory, "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.HISTORY, "memory_history", args)

    @cell(Op.QUERY, door)
    async def query(c: Cell) -> Out:
        args = {"query": c.seed.marker, "top_k": 10, "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.QUERY, "memory_query", args)

    @cell(Op.QUERY_AS_AGENT, door)
    async def query_as_agent(c: Cell) -> Out:
        args = {"query": c.seed.marker, "agent": AGENT, "user_id": c.seed.user}
        return await _mcp_tool(c, door, Op.QUERY_AS_AGENT, "memory_query", args)

    @cell(Op.VIEW_LIST, door)
    async def listing(c: Cell) -> Out:
        return await _mcp_resource(c, door, c.seed.user)

    @cell(Op.APP_READ, door)
    async def app_read(c: Cell) -> Out:
        return await _mcp_resource(c, door, f"app:{c.seed.app}")

    @cell(Op.APP_QUERY, door)
    async def app_query(c: Cell) -> Out:
        args = {"query": c.seed.marker, "top_k": 10, "user_id": f"app:{c.seed.app}"}
        return await _mcp_tool(c, door, Op.APP_QUERY, "memory_query", args)

    @cell(Op.APP_WRITE, door)
    async def app_write(c: Cell) -> Out:
        args = {"memory_id": c.seed.app_memory, "user_id": f"app:{c.seed.app}"}
        return await _mcp_tool(c, door, Op.APP_WRITE, "forget_memory", args)


_mcp_cells(Door.MCP_STDIO)
_mcp_cells(Door.MCP_HTTP)


# ---- embedded SDK: the process, admin of the account it names --------------------------------


def _sdk(
    fn: Callable[[Cell, Confide, str], object],
    *,
    shows: bool = False,
    needle: Callable[[Cell], str] | None = None,
) -> Adapter:
    async def run(c: Cell) -> Out:
        try:
            result = fn(c, c.world.sdk, c.account)
        except ConfideError as exc:
            return _error(exc)
        if not shows:
            return Out.OK
        return _seen(c, _plain(result), None if needle is None else needle(c))

    return run


def _plain(value: object) -> object:
    """A result as JSON-able data (models dumped)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


SDK_CELLS: dict[Op, Adapter] = {
    Op.STORE: _sdk(
        lambda c, s, a: s.engine.store(
            NewMemory(account_id=a, user_id=c.seed.user, key="pet", value="a cat")
        )
    ),
    Op.UPDATE: _sdk(
        lambda c, s, a: s.engine.update(c.seed.memory, {"value": "Oslo"}, account_id=a)
    ),
    Op.FORGET: _sdk(lambda c, s, a: s.engine.forget(c.seed.memory, account_id=a)),
    Op.RESTORE: _sdk(lambda c, s, a: s.engine.restore(c.seed.forgotten, account_id=a)),
    Op.MARK_PRIVATE: _sdk(
        lambda c, s, a: s.engine.set_visibility(c.seed.memory, Visibility.SHARED, account_id=a)
    ),
    Op.GET: _sdk(lambda c, s, a: s.engine.get(c.seed.memory, account_id=a), shows=True),
    Op.HISTORY: _sdk(lambda c, s, a: s.engine.history(c.seed.memory, account_id=a)),
    Op.LIST: _sdk(
        lambda c, s, a: s.engine.list_memories(MemoryFilter(account_id=a, user_id=c.seed.user)),
        shows=True,
    ),
    Op.QUERY: _sdk(
        lambda c, s, a: s.search(c.seed.marker, user_id=c.seed.user, account_id=a), shows=True
    ),
    Op.QUERY_AS_AGENT: _sdk(
        lambda c, s, a: s.query(
            {"agent": AGENT, "account_id": a, "user_id": c.seed.user, "query": c.seed.marker}
        ),
        shows=True,
    ),
    Op.EXPORT: _sdk(
        lambda c, s, a: s.engine.export_user(account_id=a, user_id=c.seed.user), shows=True
    ),
    Op.ERASE: _sdk(lambda c, s, a: s.engine.erase_user(account_id=a, user_id=c.seed.user)),
    Op.FACTS_READ: _sdk(
        lambda c, s, a: s.chat.subject_facts(account_id=a, user_id=c.seed.user, subject_id=SUBJECT),
        shows=True,
    ),
    Op.FACTS_WRITE: _sdk(
        lambda c, s, a: s.chat.set_fact_visibility(
            account_id=a, user_id=c.seed.user, fact_id=c.seed.fact, visibility="shared"
        )
    ),
    Op.APP_READ: _sdk(lambda c, s, a: s.apps.memories(a, c.seed.app), shows=True),
    Op.APP_GET: _sdk(lambda c, s, a: s.engine.get(c.seed.app_memory, account_id=a), shows=True),
    Op.APP_WRITE: _sdk(lambda c, s, a: s.apps.delete(a, c.seed.app, c.seed.app_memory)),
    Op.APP_QUERY: _sdk(
        lambda c, s, a: s.search(c.seed.marker, user_id=f"app:{c.seed.app}", account_id=a),
        shows=True,
    ),
    Op.APP_EXPORT: _sdk(
        lambda c, s, a: s.engine.export_user(account_id=a, user_id=f"app:{c.seed.app}"),
        shows=True,
    ),
    Op.APP_CONTEXT: _sdk(lambda c, s, a: s.app_context(c.seed.app, account_id=a), shows=True),
    Op.APP_CONFIGURE: _sdk(lambda c, s, a: s.apps.configure(a, c.seed.app, name="Notes")),
    Op.APP_UNINSTALL: _sdk(lambda c, s, a: s.apps.uninstall(a, c.seed.app)),
    Op.CHAT_WRITE: _sdk(
        lambda c, s, a: s.add_message(
            account_id=a,
            user_id=c.seed.user,
            conversation_id=c.seed.conversation,
            role="user",
            content="Hello again.",
        )
    ),
    Op.CHAT_READ: _sdk(
        lambda c, s, a: s.messages(
            account_id=a, user_id=c.seed.user, conversation_id=c.seed.conversation
        ),
        shows=True,
        needle=lambda c: c.seed.said,
    ),
    Op.CHAT_RETRIEVE: _sdk(
        lambda c, s, a: s.retrieve(
            f"Where does {c.seed.marker} live?",
            account_id=a,
            user_id=c.seed.user,
            conversation_id=c.seed.conversation,
        ),
        shows=True,
    ),
    Op.CHAT_RETRIEVE_AS_AGENT: _sdk(
        lambda c, s, a: s.retrieve(
            f"Where does {c.seed.marker} live?",
            account_id=a,
            user_id=c.seed.user,
            conversation_id=c.seed.conversation,
            agent=AGENT,
        ),
        shows=True,
    ),
    Op.CHAT_CONTEXT: _sdk(
        lambda c, s, a: s.memory_context(
            f"Where does {c.seed.marker} live?",
            account_id=a,
            user_id=c.seed.user,
            conversation_id=c.seed.conversation,
        ),
        shows=True,
    ),
    Op.CHAT_DELIVER: _sdk(
        lambda c, s, a: s.deliver(
            AGENT,
            f"Where does {c.seed.marker} live?",
            account_id=a,
            user_id=c.seed.user,
            conversation_id=c.seed.conversation,
            subject_id=SUBJECT,
        ),
        shows=True,
    ),
    Op.FACTS_DELETE: _sdk(
        lambda c, s, a: s.chat.delete_fact(account_id=a, user_id=c.seed.user, fact_id=c.seed.fact)
    ),
    Op.APP_CLEAR: _sdk(lambda c, s, a: s.apps.delete_all(a, c.seed.app)),
}
for _op, _fn in SDK_CELLS.items():
    cell(_op, Door.SDK)(_fn)


# ---- remote SDK --------------------------------------------------------------------------------


def _remote(
    fn: Callable[[Cell, AsyncRemoteConfide], Awaitable[object]], *, shows: bool = False
) -> Adapter:
    async def run(c: Cell) -> Out:
        remote = AsyncRemoteConfide(c.world.base, c.token)
        try:
            result = await fn(c, remote)
        except ConfideError as exc:
            return _error(exc)
        finally:
            await remote.aclose()
        return _seen(c, _plain(result)) if shows else Out.OK

    return run


REMOTE_CELLS: dict[Op, Adapter] = {
    Op.STORE: _remote(lambda c, r: r.add("She has a cat.", user_id=c.seed.user)),
    Op.UPDATE: _remote(
        lambda c, r: _with_account(
            r, lambda a: r.engine.update(c.seed.memory, {"value": "Oslo"}, account_id=a)
        )
    ),
    Op.FORGET: _remote(
        lambda c, r: _with_account(r, lambda a: r.engine.forget(c.seed.memory, account_id=a))
    ),
    Op.RESTORE: _remote(
        lambda c, r: _with_account(r, lambda a: r.engine.restore(c.seed.forgotten, account_id=a))
    ),
    Op.MARK_PRIVATE: _remote(
        lambda c, r: _with_account(
            r, lambda a: r.engine.update(c.seed.memory, {"visibility": "shared"}, account_id=a)
        )
    ),
    Op.GET: _remote(
        lambda c, r: _with_account(r, lambda a: r.engine.get(c.seed.memory, account_id=a)),
        shows=True,
    ),
    Op.HISTORY: _remote(
        lambda c, r: _with_account(r, lambda a: r.engine.history(c.seed.memory, account_id=a))
    ),
    Op.LIST: _remote(
        lambda c, r: _with_account(
            r,
            lambda a: r.engine.list_memories(MemoryFilter(account_id=a, user_id=c.seed.user)),
        ),
        shows=True,
    ),
    Op.QUERY: _remote(lambda c, r: r.search(c.seed.marker, user_id=c.seed.user), shows=True),
    Op.QUERY_AS_AGENT: _remote(
        lambda c, r: r.query({"agent": AGENT, "user_id": c.seed.user, "query": c.seed.marker}),
        shows=True,
    ),
    Op.APP_READ: _remote(
        lambda c, r: _with_account(
            r,
            lambda a: r.engine.list_memories(
                MemoryFilter(account_id=a, user_id=f"app:{c.seed.app}")
            ),
        ),
        shows=True,
    ),
    Op.APP_QUERY: _remote(
        lambda c, r: r.search(c.seed.marker, user_id=f"app:{c.seed.app}"), shows=True
    ),
    Op.APP_GET: _remote(
        lambda c, r: _with_account(r, lambda a: r.engine.get(c.seed.app_memory, account_id=a)),
        shows=True,
    ),
    Op.APP_WRITE: _remote(
        lambda c, r: _with_account(r, lambda a: r.engine.forget(c.seed.app_memory, account_id=a))
    ),
}


async def _with_account(r: AsyncRemoteConfide, call: Callable[[str], Awaitable[object]]) -> object:
    return await call(await r.account_id())


for _op, _fn in REMOTE_CELLS.items():
    cell(_op, Door.REMOTE)(_fn)


# ---- LangGraph store: acts for the principal its constructor is given -------------------------

LG_PRINCIPALS: dict[Who, Principal] = {
    Who.ADMIN: Principal(ACCOUNT, scope=Scope.ADMIN),
    Who.SERVICE: Principal(ACCOUNT, scope=Scope.SERVICE),
    Who.READ: Principal(ACCOUNT, scope=Scope.READ),
    Who.OTHER_ACCOUNT: Principal(OTHER, scope=Scope.ADMIN),
    Who.OTHER_AGENT: Principal(ACCOUNT, scope=Scope.SERVICE, agents=(OTHER_AGENT,)),
}
"""The principal a program hands the store for each of the matrix's (what a key would be)."""


def _lg(fn: Callable[[Cell, ConfideStore], object], *, shows: bool = False) -> Adapter:
    async def run(c: Cell) -> Out:
        store = ConfideStore(c.world.sdk, principal=LG_PRINCIPALS[c.who])
        try:
            result = fn(c, store)
        except ConfideError as exc:
            return _error(exc)
        if result is None:
            return Out.NOT_FOUND
        return _seen(c, _plain(result)) if shows else Out.OK

    return run


def _put(store: ConfideStore, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> bool:
    store.put(namespace, key, value)
    return True


def _lg_found(
    store: ConfideStore, namespace: tuple[str, ...], key: str, then: Callable[[], object]
) -> object:
    """``then()`` when the item is in the store's view, else ``None``."""
    if store.get(namespace, key) is None:
        return None
    then()
    return True


def _lg_app(c: Cell) -> tuple[str, ...]:
    return (f"app:{c.seed.app}",)


LANGGRAPH_CELLS: dict[Op, Adapter] = {
    Op.STORE: _lg(lambda c, s: _put(s, (c.seed.user, "notes"), "pet", {"pet": "cat"})),
    Op.VIEW_PUT: _lg(
        lambda c, s: _lg_found(
            s, (c.seed.user,), c.seed.key, lambda: s.put((c.seed.user,), c.seed.key, {"v": "Oslo"})
        )
    ),
    Op.VIEW_DELETE: _lg(
        lambda c, s: _lg_found(
            s, (c.seed.user,), c.seed.key, lambda: s.delete((c.seed.user,), c.seed.key)
        )
    ),
    Op.VIEW_GET: _lg(lambda c, s: s.get((c.seed.user,), c.seed.key), shows=True),
    Op.VIEW_LIST: _lg(lambda c, s: s.search((c.seed.user,), limit=100), shows=True),
    Op.QUERY: _lg(lambda c, s: s.search((c.seed.user,), query=c.seed.marker), shows=True),
    Op.APP_READ: _lg(lambda c, s: s.search(_lg_app(c)), shows=True),
    Op.APP_QUERY: _lg(lambda c, s: s.search(_lg_app(c), query=c.seed.marker), shows=True),
    Op.APP_WRITE: _lg(
        lambda c, s: _lg_found(
            s, _lg_app(c), c.seed.app_key, lambda: s.delete(_lg_app(c), c.seed.app_key)
        )
    ),
}
for _op, _fn in LANGGRAPH_CELLS.items():
    cell(_op, Door.LANGGRAPH)(_fn)


# ---- what does not exist, and why --------------------------------------------------------------

_NO_TOOL = "the MCP tools and the memories resource have no such operation"
_TOOLS_ACT_ON_THE_LINE = (
    "tool routes act on the call's line, never on an app or another route's data"
)
_SOCKET = "the socket's tools are the memory tools of the call's user"
_REST_ONLY = "a route of the service only (the SDK has no such call)"
_REMOTE = "the remote SDK offers add, search, query and the engine's memory operations only"
_LG = (
    "the LangGraph store offers get, put, delete, search and list_namespaces over a user's "
    "items as its agent sees them"
)
_VIEW = "reads and writes through an agent's view: the LangGraph store and the MCP resource"

ABSENT: dict[tuple[Op, Door], str] = {
    **{(op, Door.TOOLS): _TOOLS_ACT_ON_THE_LINE for op in Op
       if op not in (Op.STORE, Op.UPDATE, Op.FORGET, Op.MARK_PRIVATE, Op.HISTORY, Op.QUERY,
                     Op.QUERY_AS_AGENT)},
    **{(op, Door.REALTIME): _SOCKET for op in Op
       if op not in (Op.STORE, Op.UPDATE, Op.FORGET, Op.MARK_PRIVATE, Op.HISTORY, Op.QUERY,
                     Op.QUERY_AS_AGENT, Op.SESSION_JOIN)},
    **{(op, door): _NO_TOOL for door in (Door.MCP_STDIO, Door.MCP_HTTP) for op in Op
       if op not in (Op.STORE, Op.UPDATE, Op.FORGET, Op.MARK_PRIVATE, Op.HISTORY, Op.QUERY,
                     Op.QUERY_AS_AGENT, Op.VIEW_LIST, Op.APP_READ, Op.APP_QUERY, Op.APP_WRITE)},
    **{(op, door): _VIEW for door in (Door.REST, Door.SDK)
       for op in (Op.VIEW_GET, Op.VIEW_LIST, Op.VIEW_PUT, Op.VIEW_DELETE)},
    (Op.APP_END, Door.SDK): "blocks on the configured LLM (the route schedules it)",
    (Op.SESSION_OPEN, Door.SDK): "call sessions are the service's",
    (Op.SESSION_JOIN, Door.SDK): "call sessions are the service's",
    **{(op, Door.SDK): _REST_ONLY
       for op in (Op.PROPOSALS_READ, Op.PROPOSAL_CONFIRM, Op.PROPOSAL_REJECT, Op.USERS_LIST,
                  Op.APP_OWNERS)},
    **{(op, Door.REMOTE): _REMOTE for op in Op if op not in REMOTE_CELLS},
    **{(op, Door.LANGGRAPH): _LG for op in Op if op not in LANGGRAPH_CELLS},
}  # fmt: skip

_NO_KEY_SCOPE = "stdio has no key: the configured account acts with the service scope"
_PROCESS = "the process itself, admin of the account it names: it has no other principal"

ABSENT_PRINCIPALS: dict[Door, dict[Who, str]] = {
    Door.MCP_STDIO: {Who.ADMIN: _NO_KEY_SCOPE, Who.READ: _NO_KEY_SCOPE},
    Door.SDK: {Who.SERVICE: _PROCESS, Who.READ: _PROCESS, Who.OTHER_AGENT: _PROCESS},
}

SERVICE_ONLY = frozenset({Door.MCP_STDIO})
"""Doors whose other-account principal has the service scope (no key: the configuration)."""

CALL_DOORS = frozenset({Door.REALTIME})
"""Doors that are a call session: a ``read`` principal opens none (its turns would become
memories), so every cell of theirs is refused to it, reads included."""

COARSE: dict[tuple[Op, Door], dict[Out, Out]] = {
    # A refused socket is closed (1008) before it is accepted, whatever the reason.
    (Op.SESSION_JOIN, Door.REALTIME): {Out.NOT_FOUND: Out.DENIED},
}


def expected_at(op: Op, door: Door, who: Who) -> Out:
    """:func:`expected`, as ``door`` can say it."""
    if door in CALL_DOORS and who is Who.READ:
        return Out.DENIED
    want = expected(op, who, admin=door not in SERVICE_ONLY)
    return COARSE.get((op, door), {}).get(want, want)


KNOWN_GAPS: dict[tuple[Op, Door, Who], str] = {}
"""Cells whose door answers otherwise than the rules today: the door is to be fixed."""


# ---- completeness ------------------------------------------------------------------------------

GATE_METHODS: dict[str, Op] = {
    "readable": Op.QUERY,
    "call_tool": Op.STORE,
    "user": Op.EXPORT,
    "open_call": Op.SESSION_JOIN,
    "get": Op.GET,
    "current": Op.GET,
    "list_memories": Op.LIST,
    "history": Op.HISTORY,
    "store": Op.STORE,
    "update": Op.UPDATE,
    "forget": Op.FORGET,
    "restore": Op.RESTORE,
    "export_user": Op.EXPORT,
    "agent_view": Op.VIEW_LIST,
    "memories_for": Op.VIEW_LIST,
    "memory_by_key": Op.VIEW_GET,
    "user_ids": Op.USERS_LIST,
    "erase_user": Op.ERASE,
    "erasure": Op.ERASE,  # the erasure's scrub report: the operator's, as erasing is
    "add_message": Op.CHAT_WRITE,
    "list_messages": Op.CHAT_READ,
    "retrieve": Op.CHAT_RETRIEVE,
    "memory_context": Op.CHAT_CONTEXT,
    "deliver": Op.CHAT_DELIVER,
    "subject_facts": Op.FACTS_READ,
    "set_fact_visibility": Op.FACTS_WRITE,
    "delete_fact": Op.FACTS_DELETE,
    "app_context": Op.APP_CONTEXT,
    "open_app_end": Op.APP_END,
    "configure_app": Op.APP_CONFIGURE,
    "uninstall_app": Op.APP_UNINSTALL,
    "app_memories": Op.APP_READ,
    "delete_app_memories": Op.APP_CLEAR,
    "delete_app_memory": Op.APP_WRITE,
    "pending_proposals": Op.PROPOSALS_READ,
    "confirm_proposal": Op.PROPOSAL_CONFIRM,
    "reject_proposal": Op.PROPOSAL_REJECT,
}

ROUTES: dict[str, Op] = {
    "POST /tools/store_memory": Op.STORE,
    "POST /tools/update_memory": Op.UPDATE,
    "POST /tools/forget_memory": Op.FORGET,
    "POST /tools/mark_private": Op.MARK_PRIVATE,
    "POST /tools/{name}": Op.QUERY,  # memory_query and memory_history
    "POST /sessions": Op.SESSION_OPEN,
    "POST /sessions/{call_session_id}/connected": Op.SESSION_JOIN,
    "POST /sessions/{call_session_id}/turns": Op.SESSION_JOIN,
    "GET /sessions/{call_session_id}": Op.SESSION_JOIN,
    "POST /sessions/{call_session_id}/end": Op.SESSION_JOIN,
    "WS /sessions/{call_session_id}/realtime": Op.SESSION_JOIN,
    "GET /v1/memories": Op.LIST,
    "POST /v1/memories": Op.STORE,
    "GET /v1/memories/{memory_id}": Op.GET,
    "GET /v1/memories/{memory_id}/current": Op.GET,
    "PATCH /v1/memories/{memory_id}": Op.UPDATE,
    "DELETE /v1/memories/{memory_id}": Op.FORGET,
    "POST /v1/memories/{memory_id}/restore": Op.RESTORE,
    "GET /v1/memories/{memory_id}/history": Op.HISTORY,
    "POST /v1/memory_query": Op.QUERY,
    "POST /v1/search": Op.QUERY_AS_AGENT,
    "POST /v1/add": Op.STORE,
    "GET /v1/users/{user_id}/export": Op.EXPORT,
    "DELETE /v1/users/{user_id}": Op.ERASE,
    "GET /v1/erasures/{erasure_id}": Op.ERASE,
    "POST /v1/conversations/{conversation_id}/messages": Op.CHAT_WRITE,
    "GET /v1/conversations/{conversation_id}/messages": Op.CHAT_READ,
    "POST /v1/conversations/{conversation_id}/retrieve": Op.CHAT_RETRIEVE,
    "POST /v1/conversations/{conversation_id}/memory_context": Op.CHAT_CONTEXT,
    "POST /v1/conversations/{conversation_id}/deliver": Op.CHAT_DELIVER,
    "GET /v1/subjects/{subject_id}/facts": Op.FACTS_READ,
    "PATCH /v1/facts/{fact_id}/visibility": Op.FACTS_WRITE,
    "DELETE /v1/facts/{fact_id}": Op.FACTS_DELETE,
    "POST /v1/apps/{app_id}/conversations/{conversation_id}/end": Op.APP_END,
    "GET /v1/apps/{app_id}/context": Op.APP_CONTEXT,
    "PUT /v1/apps/{app_id}": Op.APP_CONFIGURE,
    "DELETE /v1/apps/{app_id}": Op.APP_UNINSTALL,
    "DELETE /apps/{app_id}": Op.APP_UNINSTALL,
    "GET /apps/{app_id}/memories": Op.APP_READ,
    "DELETE /apps/{app_id}/memories": Op.APP_CLEAR,
    "DELETE /apps/{app_id}/memories/{memory_id}": Op.APP_WRITE,
    "GET /v1/apps/{app_id}/memories": Op.APP_READ,
    "DELETE /v1/apps/{app_id}/memories": Op.APP_CLEAR,
    "DELETE /v1/apps/{app_id}/memories/{memory_id}": Op.APP_WRITE,
    "GET /v1/users": Op.USERS_LIST,
    "GET /v1/proposals": Op.PROPOSALS_READ,
    "POST /v1/proposals/{proposal_id}/confirm": Op.PROPOSAL_CONFIRM,
    "POST /v1/proposals/{proposal_id}/reject": Op.PROPOSAL_REJECT,
}

EXEMPT_ROUTES: dict[str, str] = {
    "GET /healthz": "liveness, no data",
    "GET /metrics": "counts across tenants, no values (tests/server/test_prometheus.py)",
    "GET /v1/account": "the key's own account and agents, nothing stored",
    "GET /v1/usage": "the key's account's LLM usage totals, no memory",
    "GET /v1/ops": "the key's account's event counts, no memory",
    "GET /ui": "static review page",
    "GET /ui/app.js": "static review page",
    "GET /ui/app.css": "static review page",
}

MCP_TOOLS: dict[str, Op] = {
    "store_memory": Op.STORE,
    "update_memory": Op.UPDATE,
    "forget_memory": Op.FORGET,
    "mark_private": Op.MARK_PRIVATE,
    "memory_query": Op.QUERY,
    "memory_history": Op.HISTORY,
    "confide://users/{user_id}/memories": Op.VIEW_LIST,
}


def _routes(routes: list[Any], prefix: str = "") -> Iterator[str]:
    """``METHOD path`` of every route, through included routers."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes, prefix + (route.include_context.prefix or ""))
            continue
        path = prefix + route.path
        if path.startswith(("/docs", "/redoc", "/openapi", "/static-offline-docs")):
            continue
        methods = getattr(route, "methods", None) or {"WS"}
        for method in sorted(set(methods) - {"HEAD"}):
            yield f"{method} {path}"


def _cells() -> Iterator[tuple[Op, Door, Who]]:
    for door in Door:
        for op in Op:
            if (op, door) in ABSENT:
                continue
            for who in Who:
                if who not in ABSENT_PRINCIPALS.get(door, {}):
                    yield op, door, who


def _params() -> list[Any]:
    params = []
    for op, door, who in _cells():
        gap = KNOWN_GAPS.get((op, door, who))
        marks = [] if gap is None else [pytest.mark.xfail(strict=True, reason=gap)]
        params.append(pytest.param(op, door, who, id=f"{op}-{door}-{who}", marks=marks))
    return params


def test_the_table_covers_every_door_route_tool_and_gate_method(tmp_path: Path) -> None:
    # (d) every door has an adapter or a stated absence for every operation, never both.
    for door in Door:
        for op in Op:
            has, absent = (op, door) in ADAPTERS, (op, door) in ABSENT
            assert has != absent, f"{op} through {door}: give an adapter or an ABSENT reason"
    # (a) every public method of the gate is an operation of the table.
    public = {
        name
        for name, member in inspect.getmembers(Gate)
        if not name.startswith("_") and callable(member)
    }
    assert public == set(GATE_METHODS), "map each Gate method to its operation"
    # (b) every route of the service is a row, or exempt for a stated reason.
    settings = Settings(
        home=tmp_path / "home",
        encryption_key=TEST_KEK.hex(),
        storage_url=f"sqlite:///{tmp_path / 'confide.db'}",
        api_docs="on",
    )
    app = create_app(settings, warm_up=False)
    try:
        served = set(_routes(list(app.routes)))
    finally:
        app.state.services.close()
    assert served == set(ROUTES) | set(EXEMPT_ROUTES), (
        "map each new route to its operation in ROUTES (or EXEMPT_ROUTES with a reason): "
        f"{sorted(served ^ (set(ROUTES) | set(EXEMPT_ROUTES)))}"
    )
    assert not set(ROUTES) & set(EXEMPT_ROUTES)
    # (c) every MCP tool and resource is a row.
    assert set(MCP_TOOLS) == _mcp_names(app.state.services)
    # Every operation a route, tool or gate method names runs through some door.
    for op in {*ROUTES.values(), *MCP_TOOLS.values(), *GATE_METHODS.values()}:
        assert any((op, door) in ADAPTERS for door in Door), op
    for door, principals in ABSENT_PRINCIPALS.items():
        assert set(principals) <= set(Who), door


def _mcp_names(services: Services) -> set[str]:
    server = create_mcp_server(services, McpScope(account_id=ACCOUNT))
    tools = {t.name for t in server._tool_manager.list_tools()}
    templates = {t.uri_template for t in server._resource_manager.list_templates()}
    return tools | templates


CHAT_OPS = frozenset({
    Op.CHAT_WRITE, Op.CHAT_READ, Op.CHAT_RETRIEVE, Op.CHAT_RETRIEVE_AS_AGENT, Op.CHAT_CONTEXT,
    Op.CHAT_DELIVER,
})  # fmt: skip
"""Operations on the seeded conversation."""


@pytest.mark.asyncio
@pytest.mark.parametrize(("op", "door", "who"), _params())
async def test_cell(world: World, op: Op, door: Door, who: Who) -> None:
    seed = _seed(
        world,
        chat=op in CHAT_OPS,
        call=op is Op.SESSION_JOIN or door in (Door.TOOLS, Door.REALTIME),
        proposal=op in (Op.PROPOSALS_READ, Op.PROPOSAL_CONFIRM, Op.PROPOSAL_REJECT),
    )
    before = _snapshot(world, seed)
    want = expected_at(op, door, who)
    got = await ADAPTERS[(op, door)](Cell(world, who, seed))
    assert got == want, f"{op} through {door} as {who}: {got}, the rules say {want}"
    if want is not Out.OK or who is Who.OTHER_ACCOUNT:
        # Refused, absent or in another account: account A's data is as it was.
        assert _snapshot(world, seed) == before
