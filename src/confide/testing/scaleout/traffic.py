"""The scaled-out deployment's clients: threads of mixed traffic spread over the services,
and the ledger of what each request was answered.

Each client thread acts for users of its own (a user's requests never run at once) and
sends them to its home service, or the next one up when its home is down (no balancer).
An operation is one of: store a memory, update or forget one of the user's, query, save a
chat message (rolling summaries follow), end an app conversation (compaction follows) or
make a call. A call is created on one service and every request of it goes there; its
turn sent to each other service, and its Realtime socket opened on one, must be refused
with 409. What was acknowledged is recorded, to be read back after the run.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = [
    "ACCOUNT",
    "AppEnd",
    "Client",
    "Cluster",
    "Ledger",
    "MemoryRecord",
    "MessageRecord",
    "Weights",
    "new_call_tag",
]

ACCOUNT = "acct-scaleout"
_PLACES = ("garden", "harbour", "library", "bakery", "station", "orchard", "chapel", "market")
_PEOPLE = ("Maya", "Tomas", "Aisha", "Lena", "Ravi", "Odette", "Kofi", "Ines")
HELD = "Call session is held by another worker"


class Cluster:
    """The services' base URLs by index, and which are up (a killed one is down until its
    replacement is ready); thread-safe."""

    def __init__(self, bases: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self._bases: list[str | None] = list(bases)
        self.generation = [0] * len(bases)
        """How many times each service was replaced."""

    def __len__(self) -> int:
        return len(self._bases)

    def base(self, index: int) -> str | None:
        """The service's base URL, ``None`` while it is down."""
        with self._lock:
            return self._bases[index]

    def live(self) -> list[str]:
        """The base URLs of the services up."""
        with self._lock:
            return [b for b in self._bases if b is not None]

    def pick(self, preferred: int) -> tuple[int, str] | None:
        """``preferred`` when up, else the next one up; ``None`` when all are down."""
        with self._lock:
            for step in range(len(self._bases)):
                index = (preferred + step) % len(self._bases)
                base = self._bases[index]
                if base is not None:
                    return index, base
        return None

    def others(self, index: int) -> list[tuple[int, str]]:
        """The services up other than ``index``."""
        with self._lock:
            return [(n, b) for n, b in enumerate(self._bases) if n != index and b is not None]

    def down(self, index: int) -> None:
        """Mark a service down (it is being killed)."""
        with self._lock:
            self._bases[index] = None

    def up(self, index: int, base: str) -> None:
        """A service's replacement is ready at ``base``."""
        with self._lock:
            self._bases[index] = base
            self.generation[index] += 1


@dataclass
class MemoryRecord:
    """One memory a client stored: its first and latest acknowledged version, the value of
    the latest, and what an unanswered request may have done since."""

    user: str
    first_id: str
    latest_id: str
    value: str
    forgotten: bool = False
    doubt: set[str] = field(default_factory=set)
    """Values of updates whose answer never came (each may or may not be stored)."""
    doubt_forgotten: bool = False
    """A forget whose answer never came."""

    @property
    def settled(self) -> bool:
        """No unanswered request touched it (the client may change it again)."""
        return not self.doubt and not self.doubt_forgotten


@dataclass(frozen=True)
class MessageRecord:
    """A chat message the service saved (201): where, and what."""

    user: str
    conversation_id: str
    index: int
    content: str


@dataclass(frozen=True)
class AppEnd:
    """An app conversation's end the service accepted (202), and which service."""

    app_id: str
    conversation_id: str
    server: int
    generation: int


@dataclass
class Ledger:
    """Every request and its answer, and what was acknowledged; thread-safe."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    acknowledged: int = 0
    unanswered: Counter[str] = field(default_factory=Counter)
    """Route → requests whose answer never came (the service died, or was down)."""
    server_errors: Counter[str] = field(default_factory=Counter)
    """``"<route> <status>: <error>"`` → count, for every 5xx answer (goal: none)."""
    unexpected: Counter[str] = field(default_factory=Counter)
    """Other answers the scenario did not expect (4xx on a valid request)."""
    ops: int = 0
    memories: list[MemoryRecord] = field(default_factory=list)
    messages: list[MessageRecord] = field(default_factory=list)
    app_ends: list[AppEnd] = field(default_factory=list)
    sent_texts: dict[str, list[str]] = field(default_factory=dict)
    """User → every text sent for them (values, messages, turns)."""
    calls_answered: int = 0
    """Calls whose every request reached the service that created them, and was answered."""
    calls_lost: int = 0
    """Calls whose service died under them (their turns died with it)."""
    held_elsewhere: int = 0
    """Requests of a call (a turn, or the Realtime socket) sent to another service, refused
    with 409 as they must be."""
    rule_broken: list[str] = field(default_factory=list)
    """A call's request answered where it must be refused, or refused by its own service."""
    call_tags: dict[str, str] = field(default_factory=dict)
    """Call tag → user, for the calls answered (their extraction must run once)."""

    def note_text(self, user: str, text: str) -> str:
        """Remember a text sent for ``user``; returns it."""
        with self.lock:
            self.sent_texts.setdefault(user, []).append(text)
        return text


Weights = dict[str, int]
"""Operation name → weight (``write``, ``update``, ``forget``, ``query``, ``chat``,
``app_end``, ``call``)."""


class Client:
    """One client thread: ``ops`` operations for its ``users``, against the :class:`Cluster`.

    Args:
        n: the client's number (its home service is ``n`` modulo the services).
        users: the users it acts for.
        cluster: the services.
        token: an admin API key of :data:`ACCOUNT`.
        ledger: where answers are recorded.
        ops: operations to run.
        apps: the app ids whose conversations it ends.
        weights: how often each operation is chosen.
        seed: its random choices' seed.
        quiet: users it must leave alone from now on (checked before each operation).
        user_locks: held while an operation acts for the user.
    """

    def __init__(
        self,
        n: int,
        users: Sequence[str],
        *,
        cluster: Cluster,
        token: str,
        ledger: Ledger,
        ops: int,
        apps: Sequence[str],
        weights: Weights,
        seed: int,
        quiet: set[str],
        user_locks: dict[str, threading.Lock],
    ) -> None:
        self.n = n
        self.users = list(users)
        self.cluster = cluster
        self.ledger = ledger
        self.ops = ops
        self.apps = list(apps)
        self.weights = weights
        self.rng = random.Random(seed)
        self.quiet = quiet
        self.user_locks = user_locks
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        self.token = token
        self.count = 0
        self.keys = 0
        self.unanswered = False
        self.error: BaseException | None = None
        self._mine: dict[str, list[MemoryRecord]] = {u: [] for u in self.users}
        self._said: dict[str, int] = dict.fromkeys(self.users, 0)

    # ---- plumbing ------------------------------------------------------------------------
    def _sentence(self, user: str) -> str:
        self.count += 1
        rng = self.rng
        text = (
            f"{rng.choice(_PEOPLE)} met {rng.choice(_PEOPLE)} at the {rng.choice(_PLACES)} "
            f"on day {self.count} of client {self.n}."
        )
        return self.ledger.note_text(user, text)

    def _key(self, prefix: str) -> str:
        """A key no other write of the run uses (a reused key would update its memory)."""
        self.keys += 1
        return f"{prefix}_c{self.n}_{self.keys}"

    def request(
        self,
        route: str,
        method: str,
        url: str,
        body: object = None,
        *,
        expect: Sequence[int] = (200, 201, 202, 204),
        params: dict[str, str] | None = None,
    ) -> httpx.Response | None:
        """Send one request and record its answer; the response when its status is one of
        ``expect``, else ``None``; :attr:`unanswered` says whether the answer never came
        (the request may or may not have taken effect)."""
        with self.ledger.lock:
            self.ledger.sent += 1
        self.unanswered = False
        try:
            response = self.http.request(method, url, json=body, params=params)
        except httpx.TransportError:
            self.unanswered = True
            with self.ledger.lock:
                self.ledger.unanswered[route] += 1
            return None
        with self.ledger.lock:
            if response.status_code in expect:
                if response.is_success:
                    self.ledger.acknowledged += 1
                return response
            kind = f"{route} {response.status_code}: {_error_of(response)}"
            if response.status_code >= 500:
                self.ledger.server_errors[kind] += 1
            else:
                self.ledger.unexpected[kind] += 1
        return None

    def _home(self) -> tuple[int, str] | None:
        return self.cluster.pick(self.n % len(self.cluster))

    # ---- operations ----------------------------------------------------------------------
    def write(self, user: str) -> None:
        """Store a new memory (``POST /v1/memories``) under a key of its own."""
        home = self._home()
        if home is None:
            return
        value = self._sentence(user)
        body = {"user_id": user, "key": self._key("note"), "value": value}
        response = self.request("POST /v1/memories", "POST", f"{home[1]}/v1/memories", body)
        if response is not None:
            memory_id = str(response.json()["id"])
            record = MemoryRecord(user, memory_id, memory_id, value)
            self._mine[user].append(record)
            with self.ledger.lock:
                self.ledger.memories.append(record)

    def _settled(self, user: str) -> MemoryRecord | None:
        choices = [r for r in self._mine[user] if r.settled and not r.forgotten]
        return self.rng.choice(choices) if choices else None

    def update(self, user: str) -> None:
        """Write a new version of one of the user's memories (``PATCH``)."""
        record, home = self._settled(user), self._home()
        if record is None or home is None:
            return self.write(user)
        value = self._sentence(user)
        url = f"{home[1]}/v1/memories/{record.latest_id}"
        response = self.request("PATCH /v1/memories/{id}", "PATCH", url, {"value": value})
        if response is not None:
            record.latest_id, record.value = str(response.json()["id"]), value
        elif self.unanswered:
            record.doubt.add(value)
        return None

    def forget(self, user: str) -> None:
        """Forget one of the user's memories (``DELETE``)."""
        record, home = self._settled(user), self._home()
        if record is None or home is None:
            return None
        url = f"{home[1]}/v1/memories/{record.latest_id}"
        response = self.request("DELETE /v1/memories/{id}", "DELETE", url)
        if response is not None:
            record.forgotten = True
        elif self.unanswered:
            record.doubt_forgotten = True
        return None

    def query(self, user: str) -> None:
        """Ask the user's memory (``POST /v1/memory_query``)."""
        home = self._home()
        if home is None:
            return
        body = {"user_id": user, "query": f"who went to the {self.rng.choice(_PLACES)}?"}
        self.request("POST /v1/memory_query", "POST", f"{home[1]}/v1/memory_query", body)

    def chat(self, user: str) -> None:
        """Save the next message of the user's conversation (rolling summaries follow)."""
        home = self._home()
        if home is None:
            return
        conversation = f"conv-{user}"
        role = "user" if self._said[user] % 2 == 0 else "assistant"
        self._said[user] += 1
        text = self._sentence(user)
        body = {"user_id": user, "role": role, "content": text}
        url = f"{home[1]}/v1/conversations/{conversation}/messages"
        response = self.request("POST /v1/conversations/{id}/messages", "POST", url, body)
        if response is not None:
            record = MessageRecord(user, conversation, int(response.json()["index"]), text)
            with self.ledger.lock:
                self.ledger.messages.append(record)

    def app_end(self, user: str) -> None:
        """End a conversation with one of the apps (its memory and compaction follow)."""
        home = self._home()
        if home is None or not self.apps:
            return
        app = self.rng.choice(self.apps)
        conversation = f"appconv-{uuid.uuid4().hex[:12]}"
        messages = [
            {"role": "user", "content": f"I prefer plan {self.count} for the weekly report."},
            {"role": "assistant", "content": "Noted."},
        ]
        url = f"{home[1]}/v1/apps/{app}/conversations/{conversation}/end"
        response = self.request(
            "POST /v1/apps/{id}/conversations/{id}/end", "POST", url, {"messages": messages}
        )
        if response is not None:
            end = AppEnd(app, conversation, home[0], self.cluster.generation[home[0]])
            with self.ledger.lock:
                self.ledger.app_ends.append(end)
        del user

    def call(self, user: str, *, tag: str | None = None, realtime: bool | None = None) -> None:
        """A call: created and answered on one service, refused (409) by the others; over
        the Realtime socket or the HTTP routes (``realtime``; by chance when ``None``)."""
        home = self._home()
        if home is None:
            return
        index, base = home
        tag = tag or new_call_tag()
        created = self.request(
            "POST /sessions", "POST", f"{base}/sessions", {"accountId": ACCOUNT, "lineId": user}
        )
        if created is None:
            return self._lost(base)
        sid = str(created.json()["callSessionId"])
        at = f"{base}/sessions/{sid}"
        turn = {"speaker": "user", "text": self.ledger.note_text(user, f"On {tag} I walked.")}
        if self.request("POST /sessions/{id}/connected", "POST", f"{at}/connected") is None:
            return self._lost(base)
        if self.request("POST /sessions/{id}/turns", "POST", f"{at}/turns", turn) is None:
            return self._lost(base)
        for _, other in self.cluster.others(index):
            self._refused_elsewhere(
                "POST /sessions/{id}/turns", f"{other}/sessions/{sid}/turns", turn
            )
        elsewhere = self.cluster.others(index)
        if elsewhere:
            self._socket_refused_elsewhere(self.rng.choice(elsewhere)[1], sid)
        if realtime is None:
            realtime = self.rng.random() < 0.5
        answered = (
            self._realtime(base, sid, user, tag)
            if realtime
            else self._tools_and_end(base, sid, user, tag)
        )
        if not answered:
            return self._lost(base)
        with self.ledger.lock:
            self.ledger.calls_answered += 1
            self.ledger.call_tags[tag] = user
        return None

    def _lost(self, base: str) -> None:
        with self.ledger.lock:
            self.ledger.calls_lost += 1
        del base

    def _refused_elsewhere(self, route: str, url: str, body: object) -> None:
        with self.ledger.lock:
            self.ledger.sent += 1
        try:
            response = self.http.post(url, json=body)
        except httpx.TransportError:
            with self.ledger.lock:
                self.ledger.unanswered[route] += 1
            return
        with self.ledger.lock:
            if response.status_code == 409 and _error_of(response) == HELD:
                self.ledger.held_elsewhere += 1
            elif response.status_code >= 500:
                self.ledger.server_errors[f"{route} {response.status_code}"] += 1
            else:
                self.ledger.rule_broken.append(f"{route} elsewhere: {response.status_code}")

    def _socket_refused_elsewhere(self, other: str, sid: str) -> None:
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        route = "WS /sessions/{id}/realtime"
        url = other.replace("http://", "ws://") + f"/sessions/{sid}/realtime"
        with self.ledger.lock:
            self.ledger.sent += 1
        try:
            with connect(url, additional_headers=self._auth(), open_timeout=120):
                pass
        except InvalidStatus as exc:
            status = exc.response.status_code
            with self.ledger.lock:
                if status == 409:
                    self.ledger.held_elsewhere += 1
                elif status >= 500:
                    self.ledger.server_errors[f"{route} {status}"] += 1
                else:
                    self.ledger.rule_broken.append(f"{route} elsewhere: {status}")
            return
        except (OSError, TimeoutError, WebSocketException):  # the service died meanwhile
            with self.ledger.lock:
                self.ledger.unanswered[route] += 1
            return
        with self.ledger.lock:
            self.ledger.rule_broken.append(f"{route} elsewhere: accepted")

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def _tools_and_end(self, base: str, sid: str, user: str, tag: str) -> bool:
        value = self.ledger.note_text(
            user, f"On {tag} the user saw the {self.rng.choice(_PLACES)}."
        )
        tool = {
            "callSessionId": sid,
            "accountId": ACCOUNT,
            "lineId": user,
            "memoryType": "fact",
            "key": self._key("call_note"),
            "value": value,
        }
        stored = self.request(
            "POST /tools/store_memory", "POST", f"{base}/tools/store_memory", tool
        )
        if stored is None:
            return False
        self._tool_stored(user, stored.json(), value)
        turn = {"speaker": "user", "text": self.ledger.note_text(user, f"Bye from {tag}.")}
        at = f"{base}/sessions/{sid}"
        if self.request("POST /sessions/{id}/turns", "POST", f"{at}/turns", turn) is None:
            return False
        return self.request("POST /sessions/{id}/end", "POST", f"{at}/end") is not None

    def _tool_stored(self, user: str, answer: dict[str, Any], value: str) -> None:
        memory_id = answer.get("memoryId")
        if answer.get("success") and answer.get("action") == "created" and memory_id:
            record = MemoryRecord(user, str(memory_id), str(memory_id), value)
            self._mine[user].append(record)
            with self.ledger.lock:
                self.ledger.memories.append(record)

    def _realtime(self, base: str, sid: str, user: str, tag: str) -> bool:
        """The call's Realtime socket on its own service: the opening instructions, a
        ``store_memory`` tool call answered, then the socket closes (ending the call)."""
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        route = "WS /sessions/{id}/realtime"
        url = base.replace("http://", "ws://") + f"/sessions/{sid}/realtime"
        value = self.ledger.note_text(
            user, f"On {tag} the user fed the {self.rng.choice(_PLACES)}."
        )
        arguments = {"memory_type": "fact", "key": self._key("call_note")}
        events = _tool_call(f"t{self.count}", "store_memory", {**arguments, "value": value})
        with self.ledger.lock:
            self.ledger.sent += 1
        try:
            with connect(url, additional_headers=self._auth(), open_timeout=120) as socket:
                opening = json.loads(socket.recv(120))
                socket.send(json.dumps(_transcript(f"Hello again from {tag}.")))
                for event in events:
                    socket.send(json.dumps(event))
                answers = [json.loads(socket.recv(120)) for _ in range(3)]
        except InvalidStatus as exc:
            status = exc.response.status_code
            with self.ledger.lock:
                if status >= 500:
                    self.ledger.server_errors[f"{route} {status}"] += 1
                else:
                    self.ledger.rule_broken.append(f"{route} own service: {status}")
            return False
        except (OSError, TimeoutError, WebSocketException):
            with self.ledger.lock:
                self.ledger.unanswered[route] += 1
            return False
        with self.ledger.lock:
            self.ledger.acknowledged += 1
            if opening.get("type") != "session.update":
                self.ledger.unexpected[f"{route} opened with {opening.get('type')}"] += 1
        output = json.loads(answers[0]["item"]["output"])
        self._tool_stored(user, output, value)
        return True

    # ---- the loop ------------------------------------------------------------------------
    def run(self) -> None:
        """Run the operations (stopping early on an error of its own, kept in :attr:`error`)."""
        actions: dict[str, Callable[[str], None]] = {
            "write": self.write,
            "update": self.update,
            "forget": self.forget,
            "query": self.query,
            "chat": self.chat,
            "app_end": self.app_end,
            "call": self.call,
        }
        names = [name for name in actions if self.weights.get(name)]
        weights = [self.weights[name] for name in names]
        try:
            for _ in range(self.ops):
                users = [u for u in self.users if u not in self.quiet]
                if users:
                    user = self.rng.choice(users)
                    with self.user_locks[user]:
                        if user not in self.quiet:
                            actions[self.rng.choices(names, weights)[0]](user)
                with self.ledger.lock:
                    self.ledger.ops += 1
        except BaseException as exc:  # reported by the scenario, which fails the run
            self.error = exc
        finally:
            self.http.close()


def new_call_tag() -> str:
    """A call's tag (see :data:`~confide.testing.scaleout.model.CALL_TAG`)."""
    return f"call-{uuid.uuid4().hex[:12]}"


def _error_of(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return "(not JSON)"
    return str(body.get("error") or body.get("detail")) if isinstance(body, dict) else "?"


def _transcript(text: str) -> dict[str, Any]:
    return {"type": "conversation.item.input_audio_transcription.completed", "transcript": text}


def _tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "response.output_item.added",
            "item": {"type": "function_call", "call_id": call_id, "name": name},
        },
        {
            "type": "response.function_call_arguments.done",
            "call_id": call_id,
            "arguments": json.dumps(arguments),
        },
    ]
