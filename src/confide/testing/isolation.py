"""The randomised isolation machine: random traffic over the HTTP service, every read checked.

A Hypothesis state machine drives the service in process (httpx's ASGI transport against
:func:`confide.server.create_app`) for two accounts, each with a service key bound to one
agent, a read key and an admin key, and for users, subjects, conversations and apps. Every
value it writes carries a *marker* (``mk`` and ten hex digits) recorded with its owner, so
any answer can be searched for markers and each one checked against who may see it:

- every answer: no 5xx, and no marker of another account;
- memory listings: exactly the user's live memories, at the versions the model expects
  (versions only grow), forgotten ones only on request; a memory by id: its version, state
  and value; its history: never shorter than before;
- ``memory_query`` and ``/v1/search``: the user's own live memories and conversation
  summaries, other users' only when shared (never forgotten or superseded values, never a
  pending proposal);
- export: only the user's own markers; facts: the user's own, and others' only while shared;
  conversations: only their owner's messages (404 for anyone else); proposals: the user's
  pending ones; app memories and context: only that app's, in that account;
- writes with another account's key, a read key or an agent the key is not bound to are
  refused (403/404) and change nothing, as later reads show.

:func:`run_isolation` runs the machine until a number of steps is reached and reports the
steps and the violations; the conformance suite demands none, ``bench/isolation.py`` counts
them over a longer run.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from confide.config import Settings
from confide.conversation.extraction import ProposedChange
from confide.engine import MemoryEngine
from confide.types import MemoryType

__all__ = [
    "IsolationReport",
    "IsolationService",
    "isolation_service",
    "markers_in_clear",
    "run_isolation",
]

MARKER = re.compile(r"mk[0-9a-f]{10}")
_MARKER_BYTES = re.compile(rb"mk[0-9a-f]{10}")
USERS = ("u1", "u2")
SUBJECTS = ("s1", "s2")
APPS = ("notes", "tasks")
DERIVED = frozenset({"conversation_summary", "subject_fact"})
"""Categories of the memories the service derives from conversations."""
WORDS = st.sampled_from(("garden", "coffee", "piano", "walk", "doctor", "music", "river"))


def new_marker() -> str:
    """A fresh marker: ``mk`` and ten hex digits."""
    return "mk" + secrets.token_hex(5)


@dataclass
class Mark:
    """Who owns a marker and where it may be seen."""

    account: str
    user: str | None
    kind: str  # "memory", "message", "proposal" or "app"
    live: bool = True  # a memory's current, active version (not superseded, not forgotten)
    shared: bool = False  # a memory marked shared (about no subject)
    app: str | None = None


@dataclass
class Lineage:
    """A memory as the model knows it."""

    account: str
    user: str
    current_id: str
    version: int
    marker: str
    active: bool = True
    history: int = 0  # events last seen; only grows


@dataclass
class Fact:
    """A subject fact learnt from its owner's listing."""

    account: str
    user: str
    subject: str
    markers: frozenset[str]
    shared: bool = False
    deleted: bool = False


@dataclass
class IsolationReport:
    """Steps run, requests made, and every violation found (each a sentence)."""

    steps: int = 0
    requests: int = 0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    markers: set[str] = field(default_factory=set)
    """Every marker written (to search the database files and logs for afterwards)."""
    seen: Counter[str] = field(default_factory=Counter)
    """What the reads saw (facts, shared facts, summaries, app memories...): proof that the
    checks had something to check."""


@dataclass
class IsolationService:
    """The service under test: the app, an in-process client and the loop that drives it."""

    app: Any
    client: httpx.AsyncClient
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the service's loop (background work it spawned runs meanwhile)."""
        return self.loop.run_until_complete(coro)

    def join(self) -> None:
        """Wait for background work (summaries, app memories)."""
        self.run(self.app.state.services.tasks.join())


@contextmanager
def isolation_service(engine: MemoryEngine, settings: Settings) -> Iterator[IsolationService]:
    """The whole service over ``engine``: chat, apps, ``memory_query`` and ``/v1/search``.

    Summaries are made every few messages (by the offline summariser), so subject facts
    appear within a few steps; the embedder is a deterministic fake (isolation does not
    depend on what vectors mean).
    """
    from confide.server import create_app
    from confide.testing.embedders import HashingEmbedder

    tuned = settings.model_copy(
        update={"summary_trigger": 2, "summary_batch": 2, "min_session_seconds": 0.0}
    )
    app = create_app(tuned, engine=engine, embedder=HashingEmbedder())
    loop = asyncio.new_event_loop()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a crash is a 500
    client = httpx.AsyncClient(transport=transport, base_url="http://confide")
    service = IsolationService(app, client, loop)
    try:
        yield service
    finally:
        service.join()
        service.run(client.aclose())
        loop.close()


def markers_in_clear(
    report: IsolationReport, files: Iterable[Path], logs: str, dumps: Iterable[bytes] = ()
) -> list[str]:
    """The markers of ``report`` found in clear in ``files`` (database, WAL), ``logs`` or
    ``dumps`` (``pg_dump`` output, see :func:`confide.testing.forensics.logical_dumps`)."""
    # One pass per file for anything shaped like a marker, then a set lookup: a server's WAL
    # runs to hundreds of megabytes and a long run writes tens of thousands of markers.
    found = set(MARKER.findall(logs))
    for path in files:
        if path.is_file():
            found.update(m.decode() for m in _MARKER_BYTES.findall(path.read_bytes()))
    for dump in dumps:
        found.update(m.decode() for m in _MARKER_BYTES.findall(dump))
    return sorted(found & report.markers)


class Violation(AssertionError):
    """A read showed what it must not (strict runs stop at the first)."""


def run_isolation(
    service: IsolationService,
    *,
    min_steps: int,
    steps_per_example: int = 60,
    examples_per_round: int = 10,
    strict: bool = True,
    progress: Callable[[IsolationReport], None] | None = None,
) -> IsolationReport:
    """Run the machine until at least ``min_steps`` steps have run; report what was seen.

    ``strict`` raises :class:`AssertionError` at the first violation (Hypothesis then shrinks
    it to a short sequence); otherwise every violation is counted and the run goes on.
    """
    report = IsolationReport()
    marks: dict[str, Mark] = {}  # every marker of the run, across examples
    machine = _machine(service, report, marks, strict)
    machine.TestCase.settings = settings(
        max_examples=examples_per_round,
        stateful_step_count=steps_per_example,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    start = time.perf_counter()
    while report.steps < min_steps:
        machine.TestCase().runTest()
        report.seconds = time.perf_counter() - start
        if progress is not None:
            progress(report)
    return report


def _machine(
    service: IsolationService, report: IsolationReport, marks: dict[str, Mark], strict: bool
) -> type[RuleBasedStateMachine]:
    keys = service.app.state.services.keys

    class Isolation(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            run = uuid.uuid4().hex[:8]
            self.accounts = [f"acct-{run}-{n}" for n in range(2)]
            self.service_key = {a: keys.create(a, agents=("default",)) for a in self.accounts}
            self.read_key = {a: keys.create(a, scope="read") for a in self.accounts}
            self.admin_key = {a: keys.create(a, admin=True) for a in self.accounts}
            self.run_id = run
            self.lineages: dict[str, Lineage] = {}
            self.conversations: dict[tuple[str, str], tuple[str, set[str]]] = {}
            self.facts: dict[str, Fact] = {}
            self.proposals: dict[str, tuple[str, str, str, bool]] = {}  # id -> acct, user, mk
            self.app_marks: dict[tuple[str, str], set[str]] = {}

        # ---- plumbing ---------------------------------------------------------------------
        def violation(self, message: str) -> None:
            report.violations.append(message)
            if strict:
                raise Violation(message)

        def call(
            self, method: str, path: str, account: str, *, token: str | None = None, **kw: Any
        ) -> httpx.Response:
            token = token or self.service_key[account]
            headers = {"Authorization": f"Bearer {token}"}
            response: httpx.Response = service.run(
                service.client.request(method, path, headers=headers, **kw)
            )
            report.requests += 1
            if response.status_code >= 500:
                self.violation(f"{method} {path} answered {response.status_code}")
            for marker in set(MARKER.findall(response.text)):
                mark = marks.get(marker)
                if mark is None or mark.account != account:
                    self.violation(f"{method} {path} showed another account's value")
            return response

        def expect(self, response: httpx.Response, *statuses: int) -> None:
            if response.status_code not in statuses:
                self.violation(
                    f"{response.request.method} {response.request.url.path} answered "
                    f"{response.status_code}, expected {statuses}"
                )

        def found(self, response: httpx.Response) -> set[str]:
            return set(MARKER.findall(response.text))

        def mark(self, **fields: Any) -> str:
            marker = new_marker()
            marks[marker] = Mark(**fields)
            report.markers.add(marker)
            return marker

        def lineage_at(self, index: int) -> Lineage:
            return list(self.lineages.values())[index % len(self.lineages)]

        def lineage_id_at(self, index: int) -> str:
            return list(self.lineages)[index % len(self.lineages)]

        def other(self, account: str) -> str:
            return next(a for a in self.accounts if a != account)

        def step(self) -> None:
            report.steps += 1

        # ---- memories ---------------------------------------------------------------------
        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS), word=WORDS, shared=st.booleans())
        def store(self, a: int, user: str, word: str, shared: bool) -> None:
            self.step()
            account = self.accounts[a]
            marker = self.mark(account=account, user=user, kind="memory", shared=shared)
            body = {
                "user_id": user,
                "key": f"k{len(self.lineages)}",
                "value": f"{word} {marker}",
                "visibility": "shared" if shared else "private",
            }
            response = self.call("POST", "/v1/memories", account, json=body)
            self.expect(response, 201)
            if response.status_code == 201:
                m = response.json()
                if m["version"] != 1:
                    self.violation("a new memory is not at version 1")
                self.lineages[m["lineage_id"]] = Lineage(account, user, m["id"], 1, marker)

        @precondition(lambda self: self.lineages)
        @rule(index=st.integers(0, 10_000), word=WORDS)
        def update(self, index: int, word: str) -> None:
            self.step()
            lin = self.lineage_at(index)
            old = marks[lin.marker]
            marker = self.mark(account=lin.account, user=lin.user, kind="memory", shared=old.shared)
            body = {"value": f"{word} {marker}"}
            response = self.call("PATCH", f"/v1/memories/{lin.current_id}", lin.account, json=body)
            if not lin.active:
                self.expect(response, 409)
                marks[marker].live = False
                return
            self.expect(response, 200)
            if response.status_code != 200:
                return
            m = response.json()
            if m["version"] != lin.version + 1:
                self.violation(f"update went from version {lin.version} to {m['version']}")
            old.live = False
            lin.current_id, lin.version, lin.marker = m["id"], m["version"], marker

        @precondition(lambda self: self.lineages)
        @rule(index=st.integers(0, 10_000))
        def forget_or_restore(self, index: int) -> None:
            self.step()
            lin = self.lineage_at(index)
            if lin.active:
                response = self.call("DELETE", f"/v1/memories/{lin.current_id}", lin.account)
            else:
                path = f"/v1/memories/{lin.current_id}/restore"
                response = self.call("POST", path, lin.account)
            self.expect(response, 200)
            if response.status_code == 200:
                lin.active = not lin.active
                marks[lin.marker].live = lin.active

        @precondition(lambda self: self.lineages)
        @rule(
            index=st.integers(0, 10_000),
            op=st.sampled_from(("get", "patch", "delete", "restore", "history")),
        )
        def another_account_reaches_in(self, index: int, op: str) -> None:
            self.step()
            lin = self.lineage_at(index)
            intruder = self.other(lin.account)
            path = f"/v1/memories/{lin.current_id}"
            method, path, body = {
                "get": ("GET", path, None),
                "patch": ("PATCH", path, {"value": "intruder"}),
                "delete": ("DELETE", path, None),
                "restore": ("POST", path + "/restore", None),
                "history": ("GET", path + "/history", None),
            }[op]
            self.expect(self.call(method, path, intruder, json=body), 403, 404)

        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS))
        def a_read_key_cannot_write(self, a: int, user: str) -> None:
            self.step()
            account = self.accounts[a]
            body = {"user_id": user, "key": "nope", "value": "read keys do not write"}
            response = self.call(
                "POST", "/v1/memories", account, token=self.read_key[account], json=body
            )
            self.expect(response, 403)
            if self.lineages:
                lin = self.lineage_at(len(self.lineages) - 1)
                patch = self.call(
                    "PATCH",
                    f"/v1/memories/{lin.current_id}",
                    lin.account,
                    token=self.read_key[lin.account],
                    json={"value": "read keys do not write"},
                )
                self.expect(patch, 403)

        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS))
        def an_unbound_agent_is_refused(self, a: int, user: str) -> None:
            self.step()
            account = self.accounts[a]
            body = {"user_id": user, "query": "garden", "agent": "intruder"}
            self.expect(self.call("POST", "/v1/memory_query", account, json=body), 403)

        # ---- conversations, facts ---------------------------------------------------------
        @rule(
            a=st.integers(0, 1),
            user=st.sampled_from(USERS),
            conv=st.integers(0, 2),
            subject=st.sampled_from(SUBJECTS),
            word=WORDS,
            count=st.integers(1, 3),
        )
        def say(self, a: int, user: str, conv: int, subject: str, word: str, count: int) -> None:
            self.step()
            account = self.accounts[a]
            conversation = self.conversation(user, conv)
            for n in range(count):
                marker = self.mark(account=account, user=user, kind="message")
                body = {
                    "user_id": user,
                    "role": "user",
                    "content": f"I really love my {word} {marker} every day {n}.",
                    "subject_id": subject,
                }
                path = f"/v1/conversations/{conversation}/messages"
                response = self.call("POST", path, account, json=body)
                owner = self.conversations.get((account, conversation))
                if owner is not None and owner[0] != user:
                    self.expect(response, 404)
                    return
                self.expect(response, 201)
                if response.status_code == 201:
                    said = self.conversations.setdefault((account, conversation), (user, set()))
                    said[1].add(marker)

        def conversation(self, user: str, conv: int) -> str:
            # Two conversations of the user's own, and one whose name every user tries.
            return f"c-{self.run_id}" if conv == 2 else f"c{conv}-{user}-{self.run_id}"

        def learn_facts(self, account: str, user: str, subject: str) -> list[dict[str, Any]]:
            service.join()
            response = self.call(
                "GET", f"/v1/subjects/{subject}/facts", account, params={"user_id": user}
            )
            self.expect(response, 200)
            if response.status_code != 200:
                return []
            facts: list[dict[str, Any]] = response.json()["facts"]
            for f in facts:
                report.seen["fact" if f["user_id"] == user else "another user's shared fact"] += 1
                known = self.facts.get(f["id"])
                if f["user_id"] == user:
                    if known is None:
                        # A new fact, or a new version of one (a summary restating it keeps
                        # the old version's visibility).
                        found = frozenset(MARKER.findall(f["content"]))
                        shared = f["visibility"] == "shared"
                        self.facts[f["id"]] = Fact(account, user, f["subject_id"], found, shared)
                    elif known.deleted:
                        self.violation("a deleted fact is still listed")
                elif f["visibility"] != "shared":
                    self.violation("another user's private fact is listed")
                elif known is None:
                    # Not learnt from its owner yet: only a later version of a fact the owner
                    # shared may be (summaries restate facts as new versions).
                    if f["version"] < 2 or not self.ever_shared(account, f["user_id"], subject):
                        self.violation("another user's fact is listed while not shared")
                elif not known.shared or known.deleted:
                    self.violation("another user's fact is listed while not shared")
                elif known.subject != subject or known.account != account:
                    self.violation("a shared fact is listed under another subject")
            return facts

        @rule(
            a=st.integers(0, 1),
            user=st.sampled_from(USERS),
            subject=st.sampled_from(SUBJECTS),
            pick=st.integers(0, 10_000),
            action=st.sampled_from(("share", "unshare", "delete", "intrude")),
        )
        def change_a_fact(self, a: int, user: str, subject: str, pick: int, action: str) -> None:
            self.step()
            account = self.accounts[a]
            own = [f for f in self.learn_facts(account, user, subject) if f["user_id"] == user]
            if not own:
                return
            fact_id = own[pick % len(own)]["id"]
            fact = self.facts[fact_id]
            if action == "intrude":
                stranger = next(u for u in USERS if u != user)
                body = {"user_id": stranger, "visibility": "shared"}
                response = self.call("PATCH", f"/v1/facts/{fact_id}/visibility", account, json=body)
                self.expect(response, 404)
                gone = self.call(
                    "DELETE", f"/v1/facts/{fact_id}", self.other(account), params={"user_id": user}
                )
                self.expect(gone, 403, 404)
            elif action == "delete":
                response = self.call(
                    "DELETE", f"/v1/facts/{fact_id}", account, params={"user_id": user}
                )
                self.expect(response, 204)
                fact.deleted = response.status_code == 204 or fact.deleted
            else:
                visibility = "shared" if action == "share" else "private"
                body = {"user_id": user, "visibility": visibility}
                response = self.call("PATCH", f"/v1/facts/{fact_id}/visibility", account, json=body)
                self.expect(response, 200)
                if response.status_code == 200:
                    fact.shared = action == "share"

        def ever_shared(self, account: str, user: str, subject: str) -> bool:
            return any(
                f.shared
                for f in self.facts.values()
                if (f.account, f.user, f.subject) == (account, user, subject)
            )

        def shared_message_markers(self, account: str) -> set[str]:
            return {
                m
                for f in self.facts.values()
                if f.account == account and f.shared and not f.deleted
                for m in f.markers
            }

        # ---- proposals, apps --------------------------------------------------------------
        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS), word=WORDS)
        def propose(self, a: int, user: str, word: str) -> None:
            self.step()
            account = self.accounts[a]
            marker = self.mark(account=account, user=user, kind="proposal", live=False)
            change = ProposedChange(
                account_id=account,
                user_id=user,
                key=f"p{len(self.proposals)}",
                current_value="",
                proposed_value=f"{word} {marker}",
                type=MemoryType.FACT,
                confidence=0.9,
                session_id=f"call-{self.run_id}",
            )
            proposal_id = service.app.state.services.proposals.file(change)
            self.proposals[proposal_id] = (account, user, marker, True)

        @precondition(lambda self: any(p[3] for p in self.proposals.values()))
        @rule(pick=st.integers(0, 10_000), decision=st.sampled_from(("confirm", "reject")))
        def decide(self, pick: int, decision: str) -> None:
            self.step()
            pending = [pid for pid, p in self.proposals.items() if p[3]]
            proposal_id = pending[pick % len(pending)]
            account, user, marker, _ = self.proposals[proposal_id]
            path = f"/v1/proposals/{proposal_id}/{decision}"
            self.expect(self.call("POST", path, self.other(account)), 403, 404)
            response = self.call("POST", path, account)
            self.expect(response, 200)
            if response.status_code != 200:
                return
            self.proposals[proposal_id] = (account, user, marker, False)
            if decision == "confirm":
                m = response.json()
                marks[marker].kind, marks[marker].live = "memory", True
                self.lineages[m["lineage_id"]] = Lineage(
                    account, user, m["id"], m["version"], marker
                )

        @rule(a=st.integers(0, 1), app=st.sampled_from(APPS), word=WORDS)
        def end_an_app_conversation(self, a: int, app: str, word: str) -> None:
            self.step()
            account = self.accounts[a]
            marker = self.mark(account=account, user=None, kind="app", app=app)
            body = {
                "messages": [
                    {"role": "user", "content": f"Please always use {word} {marker} from now on."},
                    {"role": "assistant", "content": "Noted."},
                ]
            }
            path = f"/v1/apps/{app}/conversations/c-{new_marker()[2:]}/end"
            self.expect(self.call("POST", path, account, json=body), 202)
            self.app_marks.setdefault((account, app), set()).add(marker)

        # ---- reads ------------------------------------------------------------------------
        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS), forgotten=st.booleans())
        def read_list(self, a: int, user: str, forgotten: bool) -> None:
            self.step()
            account = self.accounts[a]
            params = {"user_id": user, "limit": 1000, "include_forgotten": forgotten}
            response = self.call("GET", "/v1/memories", account, params=params)
            self.expect(response, 200)
            if response.status_code != 200:
                return
            listed: dict[str, tuple[int, str, str]] = {}
            for m in response.json()["memories"]:
                if m["category"] in DERIVED:
                    report.seen[m["category"]] += 1
                    # Summaries and facts of the user's conversations: their own words only.
                    stray = {
                        mk
                        for mk in MARKER.findall(m["value"])
                        if marks[mk].user != user or marks[mk].kind != "message"
                    }
                    fact = self.facts.get(m["id"])
                    if stray or (fact is not None and fact.deleted and m["state"] == "active"):
                        self.violation("a summary or fact of the user holds what it must not")
                    continue
                listed[m["lineage_id"]] = (m["version"], m["state"], m["user_id"])
            expected = {
                lid: (lin.version, "active" if lin.active else "soft_deleted", user)
                for lid, lin in self.lineages.items()
                if lin.account == account and lin.user == user and (lin.active or forgotten)
            }
            if listed != expected:
                self.violation(f"the listing differs from the model (forgotten={forgotten})")

        @precondition(lambda self: self.lineages)
        @rule(index=st.integers(0, 10_000))
        def read_one(self, index: int) -> None:
            self.step()
            lin = self.lineage_at(index)
            got = self.call("GET", f"/v1/memories/{lin.current_id}", lin.account)
            self.expect(got, 200)
            if got.status_code == 200:
                m = got.json()
                state = "active" if lin.active else "soft_deleted"
                if (m["version"], m["state"]) != (lin.version, state):
                    self.violation("a memory's version or state differs from the model")
                if self.found(got) != {lin.marker}:
                    self.violation("a memory's value differs from what was written")
            response = self.call("GET", f"/v1/memories/{lin.current_id}/history", lin.account)
            self.expect(response, 200)
            if response.status_code == 200:
                count = len(response.json()["history"])
                if count < lin.history:
                    self.violation("a memory's history shrank")
                lin.history = count

        def allowed_in_search(self, account: str, user: str) -> set[str]:
            own = {
                m
                for m, mark in marks.items()
                if mark.account == account
                and mark.user == user
                and (mark.kind == "message" or (mark.kind == "memory" and mark.live))
            }
            shared = {
                m
                for m, mark in marks.items()
                if mark.account == account and mark.kind == "memory" and mark.live and mark.shared
            }
            return own | shared

        @rule(
            a=st.integers(0, 1),
            user=st.sampled_from(USERS),
            word=WORDS,
            route=st.sampled_from(("query", "search", "retrieve")),
        )
        def read_search(self, a: int, user: str, word: str, route: str) -> None:
            self.step()
            service.join()
            account = self.accounts[a]
            allowed = self.allowed_in_search(account, user)
            if route == "query":
                body: dict[str, Any] = {"user_id": user, "query": word, "top_k": 50}
                response = self.call("POST", "/v1/memory_query", account, json=body)
            elif route == "search":
                body = {"user_id": user, "query": word, "top_k": 50}
                response = self.call("POST", "/v1/search", account, json=body)
            else:
                owned = [c for (acct, c), (u, _) in self.conversations.items() if acct == account]
                if not owned:
                    return
                conversation = owned[len(word) % len(owned)]
                body = {"user_id": user, "input": word}
                path = f"/v1/conversations/{conversation}/retrieve"
                response = self.call("POST", path, account, json=body)
                if self.conversations[(account, conversation)][0] != user:
                    self.expect(response, 404)
                    if self.found(response):
                        self.violation("another user's conversation was retrieved")
                    return
                allowed |= self.shared_message_markers(account)
            self.expect(response, 200)
            report.seen[f"{route} result"] += len(self.found(response))
            stray = self.found(response) - allowed
            if stray:
                kinds = sorted({marks[m].kind for m in stray if m in marks})
                self.violation(f"{route} showed values it must not ({', '.join(kinds)})")

        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS))
        def read_export(self, a: int, user: str) -> None:
            self.step()
            account = self.accounts[a]
            response = self.call("GET", f"/v1/users/{user}/export", account)
            self.expect(response, 200)
            if any(marks[m].user != user for m in self.found(response) if m in marks):
                self.violation("an export holds another user's values")

        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS), subject=st.sampled_from(SUBJECTS))
        def read_facts(self, a: int, user: str, subject: str) -> None:
            self.step()
            account = self.accounts[a]
            shared = self.shared_message_markers(account)
            for f in self.learn_facts(account, user, subject):
                if f["id"] not in self.facts:
                    continue  # a restated shared fact, judged by learn_facts
                for m in MARKER.findall(f["content"]):
                    mark = marks.get(m)
                    if mark is not None and mark.user != user and m not in shared:
                        self.violation("facts showed another user's unshared value")

        @rule(
            a=st.integers(0, 1),
            user=st.sampled_from(USERS),
            owner_of=st.sampled_from(USERS),
            conv=st.integers(0, 2),
        )
        def read_messages(self, a: int, user: str, owner_of: str, conv: int) -> None:
            self.step()
            account = self.accounts[a]
            conversation = self.conversation(owner_of, conv)
            path = f"/v1/conversations/{conversation}/messages"
            response = self.call("GET", path, account, params={"user_id": user, "limit": 200})
            owner = self.conversations.get((account, conversation))
            if owner is None or owner[0] != user:
                self.expect(response, 200, 404)
                if self.found(response):
                    self.violation("another user's messages were listed")
                return
            self.expect(response, 200)
            if self.found(response) != owner[1]:
                self.violation("a conversation's messages differ from what was said")

        @rule(a=st.integers(0, 1), user=st.sampled_from(USERS))
        def read_proposals(self, a: int, user: str) -> None:
            self.step()
            account = self.accounts[a]
            response = self.call("GET", "/v1/proposals", account, params={"user_id": user})
            self.expect(response, 200)
            if response.status_code != 200:
                return
            listed = {p["id"] for p in response.json()["proposals"]}
            report.seen["proposal"] += len(listed)
            expected = {
                pid for pid, (acct, u, _, pending) in self.proposals.items()
                if acct == account and u == user and pending
            }  # fmt: skip
            if listed != expected:
                self.violation("pending proposals differ from the model")

        @rule(a=st.integers(0, 1), app=st.sampled_from(APPS))
        def read_app_memories(self, a: int, app: str) -> None:
            self.step()
            service.join()
            account = self.accounts[a]
            allowed = self.app_marks.get((account, app), set())
            admin = self.admin_key[account]
            listed = self.call("GET", f"/apps/{app}/memories", account, token=admin)
            context = self.call("GET", f"/v1/apps/{app}/context", account)
            report.seen["app memory"] += len(self.found(listed))
            for response in (listed, context):
                self.expect(response, 200)
                if self.found(response) - allowed:
                    self.violation("an app's memories show another app's values")

    return Isolation
