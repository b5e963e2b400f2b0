"""Throughput: ``memory_query`` and writes over HTTP on loopback at 1, 8 and 32 concurrent
clients, against one ``confide serve`` on SQLite and two on one PostgreSQL, and mem0 beside.

Each backend gets a fresh store (``_served.served_store``: a SQLite folder, or the embedded
PostgreSQL with pgvector) pre-filled through the engine (``MemoryEngine.store_many`` with the
real local embedder, the shipped ONNX MiniLM, and the default settings, store-time linking
included) with ``--prefill`` template sentences (``scale.sentences``) spread evenly over
``--users`` users of one account, then settled (``_engine_side.settle``). The services start
with that store (``confide.testing.processes.serve``); every user is queried once on every
service before the timed cells, so a cell does not time a user's first load.

A cell is one (backend, operation, concurrency): ``--clients`` asyncio clients on one httpx
connection pool, each sending its next request as soon as the last one is answered, for
``--seconds``. Client ``n`` acts for user ``n mod --users`` and sends its requests to service
``n mod --servers`` (with one client, one service gets all the traffic). ``query`` is
``POST /v1/memory_query`` (the README's route for ``memory_query``; ``top_k`` 3) with
template questions (``scale.questions``); ``write`` is ``POST /v1/memories`` with a fresh key
and a sentence. The query cells run before the write cells, so queries search the pre-filled
memories only. A cell reports requests a second (answers over the cell's wall time, the
requests still running at the deadline included), p50/p95/p99 latency, and the failed
answers (a status that is not 2xx, or an httpx exception) by kind.

CPU, per cell, in cores (CPU seconds over wall seconds, from /proc): ``serve`` is the
``confide serve`` processes together (per process in the JSON), ``loop`` their main threads
alone (uvicorn's event loop; the rest is the threads the engine's calls and the embedder's
ONNX runtime run on), ``bench`` this process (the clients, or mem0 itself), ``machine``
every busy CPU of the machine (PostgreSQL, and any other work running on it). ``confide
serve`` has no option for several worker processes: one process runs one uvicorn event loop,
and the engine's calls go to threads under one GIL, so ``serve`` at 32 clients shows how
much of the machine one process can use (read it beside ``machine``: on a machine busy with
other work it shows the share the process got, not what it could use).

mem0 (the ``bench`` extra, ``mem0ai``) runs in the same process, with no HTTP: the mem0ai
package ships no server (mem0's REST server is a separate Docker stack), so
``_mem0_side.make_mem0_side`` builds ``mem0.Memory`` with ``infer=False``, embedded Qdrant
and Confide's own MiniLM, and the same number of threads call ``Memory.search`` (top_k 3,
the user's filter) and ``Memory.add``. It is pre-filled with the same sentences for the same
users. Without mem0 installed, the run says so and skips it.

    python bench/throughput.py [--clients 1,8,32] [--seconds 15] [--backends sqlite,postgres]
                               [--servers 2] [--prefill 4000] [--users 8] [--no-mem0]
                               [--json OUT]

The JSON has ``setup`` (prefill, users, seconds, clients, servers, cpu_count, load averages
before and after, mem0's setup or why it was skipped) and ``cells``, one per cell:
``backend``, ``transport`` (``http`` or ``in-process``), ``servers``, ``operation``
(``query`` or ``write``), ``clients``, ``seconds``, ``requests``, ``rps``, ``p50_ms``,
``p95_ms``, ``p99_ms``, ``errors``, ``error_kinds`` (the first few kinds with their counts),
``serve_cores``, ``serve_cores_each``, ``loop_cores``, ``bench_cores`` and
``machine_cores``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine_side import pct_ms, settle
from _progress import clocked, progress_bar, say
from _served import ServedStore, served_store
from confide.client import Confide
from confide.server.auth import ApiKeys
from confide.testing.processes import serve
from scale import questions, sentences

ACCOUNT = "acct-throughput"
OPERATIONS = ("query", "write")
_TICK = os.sysconf("SC_CLK_TCK")
_KINDS_KEPT = 5


@dataclass(frozen=True)
class Workload:
    """What the clients send: users, questions and sentences to write."""

    users: Sequence[str]
    asked: Sequence[str]
    texts: Sequence[str]

    def user(self, client: int) -> str:
        """The user client ``client`` acts for."""
        return self.users[client % len(self.users)]

    def question(self, client: int, i: int) -> str:
        """Client ``client``'s ``i``-th question (clients start at different questions)."""
        return self.asked[(client * 37 + i) % len(self.asked)]

    def text(self, client: int, i: int) -> str:
        """Client ``client``'s ``i``-th sentence to write."""
        return self.texts[(client * 211 + i) % len(self.texts)]


@dataclass
class Tally:
    """One client's latencies (seconds) and failed answers by kind."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


def _merge(tallies: Sequence[Tally]) -> Tally:
    whole = Tally()
    for tally in tallies:
        whole.latencies += tally.latencies
        whole.errors.update(tally.errors)
    return whole


def process_cpu(pid: int, *, main_thread: bool = False) -> float:
    """CPU seconds (user + system) process ``pid`` has used, its threads included, or its
    main thread's alone (uvicorn's event loop)."""
    stat = Path(f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (not idle, not waiting on I/O)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _TICK  # guest time is in user already


@dataclass(frozen=True)
class Cell:
    """The figures of one (backend, operation, concurrency)."""

    backend: str
    transport: str
    servers: int
    operation: str
    clients: int
    wall: float
    tally: Tally
    serve_cpu: Sequence[float]
    loop_cpu: Sequence[float]
    bench_cpu: float
    machine_cpu: float

    def figures(self) -> dict[str, Any]:
        """The cell as the JSON and the table show it."""
        lat = self.tally.latencies
        return {
            "backend": self.backend,
            "transport": self.transport,
            "servers": self.servers,
            "operation": self.operation,
            "clients": self.clients,
            "seconds": round(self.wall, 2),
            "requests": len(lat),
            "rps": round(len(lat) / self.wall, 1),
            "p50_ms": round(pct_ms(lat, 0.50), 1) if lat else None,
            "p95_ms": round(pct_ms(lat, 0.95), 1) if lat else None,
            "p99_ms": round(pct_ms(lat, 0.99), 1) if lat else None,
            "errors": sum(self.tally.errors.values()),
            "error_kinds": dict(self.tally.errors.most_common(_KINDS_KEPT)),
            "serve_cores": round(sum(self.serve_cpu) / self.wall, 2) if self.serve_cpu else None,
            "serve_cores_each": [round(c / self.wall, 2) for c in self.serve_cpu],
            "loop_cores": round(sum(self.loop_cpu) / self.wall, 2) if self.loop_cpu else None,
            "bench_cores": round(self.bench_cpu / self.wall, 2),
            "machine_cores": round(self.machine_cpu / self.wall, 2),
        }


def timed_cell(
    label: str,
    seconds: float,
    pids: Sequence[int],
    run: Callable[[float], Awaitable[list[Tally]]],
    **where: Any,
) -> Cell:
    """Run ``run(deadline)`` on a bar, measuring wall time and CPU around it."""
    serve0 = [process_cpu(pid) for pid in pids]
    loop0 = [process_cpu(pid, main_thread=True) for pid in pids]
    bench0, machine0, start = time.process_time(), machine_busy(), time.perf_counter()

    async def whole() -> list[Tally]:
        return await run(time.perf_counter() + seconds)

    with progress_bar(label, "s") as show:
        tallies = asyncio.run(clocked(whole(), seconds, show))
    wall = time.perf_counter() - start
    return Cell(
        **where,
        wall=wall,
        tally=_merge(tallies),
        serve_cpu=[process_cpu(pid) - before for pid, before in zip(pids, serve0, strict=True)],
        loop_cpu=[
            process_cpu(pid, main_thread=True) - before
            for pid, before in zip(pids, loop0, strict=True)
        ],
        bench_cpu=time.process_time() - bench0,
        machine_cpu=machine_busy() - machine0,
    )


async def http_clients(
    bases: Sequence[str],
    token: str,
    work: Workload,
    operation: str,
    clients: int,
    deadline: float,
    tag: str,
) -> list[Tally]:
    """``clients`` closed-loop clients sending ``operation`` until ``deadline``."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as http:

        async def client(n: int) -> Tally:
            tally, base, user, i = Tally(), bases[n % len(bases)], work.user(n), 0
            while time.perf_counter() < deadline:
                if operation == "query":
                    url = f"{base}/v1/memory_query"
                    body = {"user_id": user, "query": work.question(n, i), "top_k": 3}
                else:
                    url = f"{base}/v1/memories"
                    body = {"user_id": user, "key": f"{tag}_{n}_{i}", "value": work.text(n, i)}
                i += 1
                start = time.perf_counter()
                try:
                    response = await http.post(url, json=body)
                except httpx.HTTPError as exc:
                    tally.latencies.append(time.perf_counter() - start)
                    tally.errors[type(exc).__name__] += 1
                    continue
                tally.latencies.append(time.perf_counter() - start)
                if not response.is_success:
                    tally.errors[f"{response.status_code}: {response.text[:80]}"] += 1
            return tally

        return list(await asyncio.gather(*(client(n) for n in range(clients))))


def prefill(store: ServedStore, work: Workload, count: int) -> tuple[str, float]:
    """Store ``count`` sentences for the users through the engine; an API key and the
    rows a second."""
    rows = [
        {"account_id": ACCOUNT, "user_id": work.user(i), "key": f"pre_{i}", "value": text}
        for i, text in enumerate(sentences(count, seed=1))
    ]
    with Confide.open(store.settings) as app:
        token = ApiKeys.over(app.engine.storage).create(ACCOUNT)
        start = time.perf_counter()
        with progress_bar(f"{store.backend}: prefill", "memories") as show:
            for lo in range(0, len(rows), 250):
                app.engine.store_many(rows[lo : lo + 250])
                show(min(lo + 250, len(rows)), len(rows))
        rate = len(rows) / (time.perf_counter() - start)
        settle(app.engine.storage)
    return token, rate


def warm_up(bases: Sequence[str], token: str, work: Workload) -> None:
    """One query of every user on every service (a user's first load is not timed)."""
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        for base in bases:
            for user in work.users:
                body = {"user_id": user, "query": work.question(0, 0)}
                http.post(f"{base}/v1/memory_query", json=body).raise_for_status()


def confide_cells(
    backend: str, servers: int, work: Workload, args: argparse.Namespace
) -> tuple[list[Cell], float]:
    """Every cell of one backend, and the prefill's rows a second."""
    cells = []
    with (
        tempfile.TemporaryDirectory(prefix="confide-throughput-") as tmp,
        served_store(backend, Path(tmp)) as store,
    ):
        token, rate = prefill(store, work, args.prefill)
        with ExitStack() as stack:
            processes = [stack.enter_context(serve(store.env)) for _ in range(servers)]
            bases = [p.wait_ready() for p in processes]
            warm_up(bases, token, work)
            for operation in OPERATIONS:
                for clients in args.clients:

                    def run(
                        deadline: float, operation: str = operation, clients: int = clients
                    ) -> Awaitable[list[Tally]]:
                        return http_clients(
                            bases, token, work, operation, clients, deadline, f"c{clients}"
                        )

                    cell = timed_cell(
                        f"{backend} {operation} x{clients}",
                        args.seconds,
                        [p.pid for p in processes],
                        run,
                        backend=backend,
                        transport="http",
                        servers=servers,
                        operation=operation,
                        clients=clients,
                    )
                    say(_row(cell.figures()))
                    cells.append(cell)
    return cells, rate


def mem0_cells(work: Workload, args: argparse.Namespace) -> tuple[list[Cell], str]:
    """mem0's cells (in process, threads), and its setup line."""
    from _mem0_side import make_mem0_side
    from confide.embedders.local import LocalMiniLMEmbedder

    side = make_mem0_side(LocalMiniLMEmbedder())
    if side is None:
        return [], "skipped: mem0ai (the bench extra) is not installed"
    memory = side.memory
    cells = []
    try:
        texts = sentences(args.prefill, seed=1)
        with progress_bar("mem0: prefill", "memories") as show:
            for lo in range(0, len(texts), 50):
                chunk = range(lo, min(lo + 50, len(texts)))
                for user in work.users:
                    messages = [
                        {"role": "user", "content": texts[i]} for i in chunk if work.user(i) == user
                    ]
                    if messages:
                        memory.add(messages, user_id=user, infer=False)
                show(chunk.stop, len(texts))
        for user in work.users:
            memory.search(work.question(0, 0), top_k=3, filters={"user_id": user})
        for operation in OPERATIONS:
            for clients in args.clients:

                def call(n: int, i: int, operation: str = operation) -> None:
                    if operation == "query":
                        memory.search(
                            work.question(n, i), top_k=3, filters={"user_id": work.user(n)}
                        )
                    else:
                        content = work.text(n, i)
                        memory.add(
                            [{"role": "user", "content": content}],
                            user_id=work.user(n),
                            infer=False,
                        )

                def loop(n: int, deadline: float, call: Callable[[int, int], None] = call) -> Tally:
                    tally, i = Tally(), 0
                    while time.perf_counter() < deadline:
                        start = time.perf_counter()
                        try:
                            call(n, i)
                        except Exception as exc:  # every failure counted, by kind
                            tally.errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
                        tally.latencies.append(time.perf_counter() - start)
                        i += 1
                    return tally

                async def run(
                    deadline: float,
                    clients: int = clients,
                    loop: Callable[[int, float], Tally] = loop,
                ) -> list[Tally]:
                    running = asyncio.get_running_loop()
                    with ThreadPoolExecutor(clients) as pool:
                        done = [
                            running.run_in_executor(pool, loop, n, deadline) for n in range(clients)
                        ]
                        return list(await asyncio.gather(*done))

                cell = timed_cell(
                    f"mem0 {operation} x{clients}",
                    args.seconds,
                    [],
                    run,
                    backend="mem0",
                    transport="in-process",
                    servers=0,
                    operation=operation,
                    clients=clients,
                )
                say(_row(cell.figures()))
                cells.append(cell)
    finally:
        side.close()
    return cells, side.setup


_HEAD = (
    f"{'backend':<11} {'transport':<10} {'op':<5} {'clients':>7} {'req/s':>8} {'p50 ms':>8} "
    f"{'p95 ms':>8} {'p99 ms':>8} {'errors':>6} {'serve':>6} {'loop':>5} {'bench':>6} "
    f"{'machine':>7}"
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row(f: dict[str, Any]) -> str:
    backend = f["backend"] if f["servers"] <= 1 else f"{f['backend']} x{f['servers']}"
    serve_cores = "-" if f["serve_cores"] is None else f"{f['serve_cores']:.2f}"
    loop_cores = "-" if f["loop_cores"] is None else f"{f['loop_cores']:.2f}"
    line = (
        f"{backend:<11} {f['transport']:<10} {f['operation']:<5} {f['clients']:>7} "
        f"{f['rps']:>8.1f} {_ms(f['p50_ms']):>8} {_ms(f['p95_ms']):>8} {_ms(f['p99_ms']):>8} "
        f"{f['errors']:>6} {serve_cores:>6} {loop_cores:>5} {f['bench_cores']:>6.2f} "
        f"{f['machine_cores']:>7.2f}"
    )
    for kind, count in f["error_kinds"].items():
        line += f"\n  error x{count}: {kind}"
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cells and print the table; exit 1 on any failed answer of Confide's."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", default="1,8,32", help="concurrencies, comma-separated")
    parser.add_argument("--seconds", type=float, default=15.0, help="per cell")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--servers", type=int, default=2, help="services on PostgreSQL")
    parser.add_argument("--prefill", type=int, default=4000, help="memories stored first")
    parser.add_argument("--users", type=int, default=8, help="users the memories belong to")
    parser.add_argument("--no-mem0", action="store_true", help="skip mem0")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    args.clients = [int(c) for c in args.clients.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    for backend in backends:
        if backend not in ("sqlite", "postgres"):
            parser.error(f"unknown backend {backend!r}")
    work = Workload(
        users=[f"user-{u}" for u in range(args.users)],
        asked=questions(500),
        texts=sentences(5000, seed=2),
    )
    load_before = os.getloadavg()
    print(
        f"{args.prefill} memories over {args.users} users per store, {args.seconds:.0f} s a "
        f"cell, {os.cpu_count()} CPUs, load average {load_before[0]:.2f} "
        f"{load_before[1]:.2f} {load_before[2]:.2f}; "
        "confide serve: one process, one event loop (it has no workers option)",
        flush=True,
    )
    print(f"cores = CPU seconds / wall seconds\n{_HEAD}", flush=True)
    cells: list[Cell] = []
    prefill_rates: dict[str, float] = {}
    for backend in backends:
        done, prefill_rates[backend] = confide_cells(
            backend, 1 if backend == "sqlite" else args.servers, work, args
        )
        cells += done
    if args.no_mem0:
        mem0 = "skipped: --no-mem0"
    elif importlib.util.find_spec("mem0") is None:
        mem0 = "skipped: mem0ai (the bench extra) is not installed"
    else:
        done, mem0 = mem0_cells(work, args)
        cells += done
    load_after = os.getloadavg()
    print(f"mem0: {mem0}")
    if any(c.backend == "mem0" for c in cells):
        print("  mem0 is called in this process by threads (no HTTP), Confide over HTTP")
    if prefill_rates:
        rates = ", ".join(f"{b} {r:.0f}/s" for b, r in prefill_rates.items())
        print(f"prefill through the engine: {rates}")
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    figures = [c.figures() for c in cells]
    if args.json is not None:
        setup = {
            "prefill": args.prefill,
            "users": args.users,
            "seconds": args.seconds,
            "clients": args.clients,
            "servers": {"sqlite": 1, "postgres": args.servers},
            "cpu_count": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
            "prefill_rows_per_s": {b: round(r, 1) for b, r in prefill_rates.items()},
            "mem0": mem0,
        }
        args.json.write_text(json.dumps({"setup": setup, "cells": figures}, indent=2) + "\n")
    # mem0's failures are reported, not Confide's to answer for.
    return 1 if any(f["errors"] for f in figures if f["backend"] != "mem0") else 0


if __name__ == "__main__":
    raise SystemExit(main())
