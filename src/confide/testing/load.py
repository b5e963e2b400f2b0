"""Mixed traffic from many concurrent clients against running services, with latencies per
route and every failed answer counted.

Each client acts for a user of its own and loops until the time is up, choosing among: store
a memory (``POST /v1/memories``), update one of its memories (``PATCH``), query
(``POST /v1/memory_query``) and a short call (create, connect, a few turns, a
``store_memory`` tool call, end). With several services (one database), a client's plain
requests go to one of them, a call is created on any, and its later requests are routed by
``callSessionId``, as a load balancer with sticky routing does. ``bench/load.py`` prints
the figures; the suite runs a short load and asserts no failed answer.
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

__all__ = ["LOAD_ACCOUNT", "LoadReport", "run_load"]

LOAD_ACCOUNT = "acct-load"
_PLACES = ("garden", "harbour", "library", "bakery", "station", "orchard", "chapel", "market")
_PEOPLE = ("Maya", "Tomas", "Aisha", "Lena", "Ravi", "Odette", "Kofi", "Ines")


@dataclass
class LoadReport:
    """Latencies (seconds) per route and the failed answers, by route and kind."""

    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    sent: set[str] = field(default_factory=set)
    """Every text the clients sent (memory values and call turns), for the sentinel scan."""
    """``"<route> <status or exception>: <error message>"`` → count (messages never hold
    values: they are the service's own error texts)."""

    @property
    def requests(self) -> int:
        """Requests answered, failed ones included."""
        return sum(len(v) for v in self.latencies.values())

    def percentiles(self) -> dict[str, tuple[int, float, float]]:
        """Route → (requests, p50 ms, p95 ms)."""
        out = {}
        for route, values in sorted(self.latencies.items()):
            ordered = sorted(values)
            p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            out[route] = (len(values), statistics.median(ordered) * 1000, p95 * 1000)
        return out


def _pick(bases: Sequence[str], key: str) -> str:
    # Sticky routing: a stable hash of the call's id picks its service.
    return bases[zlib.crc32(key.encode()) % len(bases)]


class _Client:
    def __init__(
        self, n: int, bases: Sequence[str], http: httpx.AsyncClient, report: LoadReport
    ) -> None:
        self.n = n
        self.user = f"load-user-{n}"
        self.bases = bases
        self.home = bases[n % len(bases)]
        self.http = http
        self.report = report
        self.rng = random.Random(n)
        self.memories: list[str] = []
        self.count = 0

    def _sentence(self) -> str:
        self.count += 1
        rng = self.rng
        text = (
            f"{rng.choice(_PEOPLE)} met {rng.choice(_PEOPLE)} at the {rng.choice(_PLACES)} "
            f"on day {self.count} and talked about the {rng.choice(_PLACES)}."
        )
        self.report.sent.add(text)
        return text

    async def _call(
        self, route: str, method: str, url: str, body: object = None
    ) -> httpx.Response | None:
        start = time.perf_counter()
        try:
            response = await self.http.request(method, url, json=body)
        except httpx.HTTPError as exc:
            self.report.latencies.setdefault(route, []).append(time.perf_counter() - start)
            self.report.errors[f"{route} {type(exc).__name__}"] += 1
            return None
        self.report.latencies.setdefault(route, []).append(time.perf_counter() - start)
        if response.is_success:
            return response
        try:
            message = str(response.json().get("error"))
        except ValueError:
            message = "(not JSON)"
        self.report.errors[f"{route} {response.status_code}: {message}"] += 1
        return None

    async def store(self) -> None:
        body = {"user_id": self.user, "key": f"note_{self.count}", "value": self._sentence()}
        response = await self._call("POST /v1/memories", "POST", f"{self.home}/v1/memories", body)
        if response is not None:
            self.memories.append(str(response.json()["id"]))

    async def update(self) -> None:
        if not self.memories:
            await self.store()
            return
        at = self.rng.randrange(len(self.memories))
        url = f"{self.home}/v1/memories/{self.memories[at]}"
        response = await self._call(
            "PATCH /v1/memories/{id}", "PATCH", url, {"value": self._sentence()}
        )
        if response is not None:
            self.memories[at] = str(response.json()["id"])  # the new version

    async def query(self) -> None:
        body = {"user_id": self.user, "query": f"who went to the {self.rng.choice(_PLACES)}?"}
        await self._call("POST /v1/memory_query", "POST", f"{self.home}/v1/memory_query", body)

    async def call(self) -> None:
        created = await self._call(
            "POST /sessions",
            "POST",
            f"{self.rng.choice(self.bases)}/sessions",
            {"accountId": LOAD_ACCOUNT, "lineId": self.user},
        )
        if created is None:
            return
        sid = str(created.json()["callSessionId"])
        base = f"{_pick(self.bases, sid)}/sessions/{sid}"
        await self._call("POST /sessions/{id}/connected", "POST", f"{base}/connected")
        for speaker in ("user", "assistant", "user"):
            body = {"speaker": speaker, "text": self._sentence()}
            await self._call("POST /sessions/{id}/turns", "POST", f"{base}/turns", body)
        tool = {
            "callSessionId": sid,
            "accountId": LOAD_ACCOUNT,
            "lineId": self.user,
            "memoryType": "fact",
            "key": f"call_note_{self.count}",
            "value": self._sentence(),
        }
        await self._call(
            "POST /tools/store_memory", "POST", f"{_pick(self.bases, sid)}/tools/store_memory", tool
        )
        await self._call("POST /sessions/{id}/end", "POST", f"{base}/end")

    async def run(self, deadline: float) -> None:
        actions = (self.store, self.update, self.query, self.call)
        weights = (35, 20, 35, 10)
        while time.perf_counter() < deadline:
            await self.rng.choices(actions, weights)[0]()


async def run_load(bases: Sequence[str], token: str, *, clients: int, seconds: float) -> LoadReport:
    """Run ``clients`` concurrent clients for ``seconds`` against the services at ``bases``
    (one database), with an API key of :data:`LOAD_ACCOUNT`."""
    report = LoadReport(seconds=seconds)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as http:
        deadline = time.perf_counter() + seconds
        await asyncio.gather(
            *(_Client(n, bases, http, report).run(deadline) for n in range(clients))
        )
    return report


SENT_SHAPE = re.compile(
    rb"[A-Z][a-z]+ met [A-Z][a-z]+ at the [a-z]+ on day \d+ and talked about the [a-z]+\."
)
"""Every text :func:`run_load` sends has this shape (for
:func:`~confide.testing.forensics.sentinels_in_clear`)."""
