"""The scaled-out deployment under faults: :func:`run_scaleout` and what it reports.

Several ``confide serve`` and ``confide worker`` processes share one PostgreSQL and one
home folder (its key file). Client threads send a bounded mixed load (see
:mod:`confide.testing.scaleout.traffic`) while faults are injected at set shares of it: one
user is erased over HTTP, the KEK is rotated by ``confide keys rotate`` in a process of its
own, and one service and one worker are killed with SIGKILL and started again. Then every
acknowledged write is read back over HTTP, the services stop (their background work
finishes), the workers drain the queue, and the store is checked.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from confide.config import Settings
from confide.crypto.keyring import load_keyring
from confide.engine import MemoryEngine
from confide.server.auth import ApiKeys
from confide.storage import open_storage
from confide.storage.jobs import JobState, SqlJobTables
from confide.testing.processes import ConfideProcess, confide_env, serve, worker
from confide.testing.scaleout.checks import (
    ErasedUser,
    ReadBack,
    StoreCheck,
    check_store,
    owner_rows,
    read_back,
    residue,
)
from confide.testing.scaleout.model import ScaleoutModel
from confide.testing.scaleout.traffic import (
    ACCOUNT,
    Client,
    Cluster,
    Ledger,
    Weights,
    new_call_tag,
)
from confide.testing.scripted_llm import ScriptedLLMServer

__all__ = ["ScaleoutOptions", "ScaleoutReport", "run_scaleout"]

DEFAULT_WEIGHTS: Weights = {
    "write": 20,
    "update": 12,
    "forget": 5,
    "query": 15,
    "chat": 25,
    "app_end": 10,
    "call": 8,
}


@dataclass(frozen=True, kw_only=True)
class ScaleoutOptions:
    """The run's size and shape.

    ``ops`` is per client; the faults come once these shares of every client's operations
    are done: ``erase_at`` (the first user is erased), ``rotate_at`` (the KEK is rotated),
    ``kill_at`` (service 1 and worker 0 are killed, then started again).
    """

    users: int = 12
    clients: int = 4
    ops: int = 150
    servers: int = 3
    workers: int = 2
    apps: int = 2
    app_cap: int = 3
    summary_trigger: int = 6
    summary_batch: int = 4
    erase_at: float = 0.25
    rotate_at: float = 0.45
    kill_at: float = 0.6
    seed: int = 0
    pool_max: int = 4
    drain_seconds: float = 180.0
    weights: Weights = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))


@dataclass
class ScaleoutReport:
    """What the run did and found; :meth:`problems` lists every goal missed."""

    options: ScaleoutOptions
    processes: dict[str, int] = field(default_factory=dict)
    """Processes running at once, by kind."""
    started: dict[str, int] = field(default_factory=dict)
    """Processes started over the run (restarts included), by kind."""
    faults: list[str] = field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    unanswered: dict[str, int] = field(default_factory=dict)
    """Requests whose answer never came, by route (in flight at the kill, or sent to the
    killed service before it was known down)."""
    server_errors: dict[str, int] = field(default_factory=dict)
    unexpected: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    """Acknowledged writes by kind (memories, chat messages, app ends, calls)."""
    read_back: ReadBack = field(default_factory=ReadBack)
    store: StoreCheck = field(default_factory=StoreCheck)
    extracted_twice: list[str] = field(default_factory=list)
    """Calls whose extraction ran more than once (goal none)."""
    calls: dict[str, int] = field(default_factory=dict)
    rule_broken: list[str] = field(default_factory=list)
    erased_rows: dict[str, int] = field(default_factory=dict)
    """Rows of the erased user after the run, by ``data:<table>`` or ``keys:<table>``."""
    residue: list[str] = field(default_factory=list)
    residue_clean: bool = True
    keys_under_former_kek: int = 0
    """Stored keys still wrapped under a KEK the rotation retired (readable, but ``confide
    keys retire`` refuses until a rotation re-wraps them)."""
    service_warnings: dict[str, int] = field(default_factory=dict)
    client_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def problems(self) -> list[str]:
        """Every goal the run missed (empty: the deployment held)."""
        out: list[str] = []
        rb, store = self.read_back, self.store
        checks: list[tuple[str, object]] = [
            ("acknowledged writes lost", rb.lost),
            ("acknowledged forgets not forgotten", rb.forgotten_back),
            ("read-back errors", dict(rb.errors)),
            ("5xx answers", self.server_errors),
            ("unexpected answers", self.unexpected),
            ("summary ranges overlapping", store.overlapping_ranges),
            ("summaries stored twice", store.extra_chunks),
            ("app memories written twice", store.app_ends_twice),
            ("app ends lost by a live service", store.app_ends_missing),
            ("app caps not exact", self.caps_broken()),
            ("calls extracted twice", self.extracted_twice),
            ("call sessions answered against the rule", self.rule_broken),
            ("jobs failed", store.jobs_failed),
            ("jobs stranded", store.jobs_stranded),
            ("rows of the erased user", self.erased_rows),
            ("client errors", self.client_errors),
        ]
        out += [f"{name}: {found}" for name, found in checks if found]
        if not self.residue_clean:
            out.append("residue of the erased user: " + "; ".join(self.residue))
        return out

    def caps_broken(self) -> dict[str, int]:
        """Apps whose active memories are not exactly their cap (all had more ends)."""
        cap = self.options.app_cap
        return {app: n for app, n in self.store.app_counts.items() if n != cap}

    def lines(self) -> list[str]:
        """The figures, one a line, as ``bench/scaleout.py`` prints them."""
        rb, store = self.read_back, self.store
        return [
            f"processes: {_counts(self.processes)} at once; started over the run "
            f"{_counts(self.started)}",
            f"requests: {self.sent} sent, {self.acknowledged} acknowledged, "
            f"{sum(self.unanswered.values())} unanswered (in flight at the kill), "
            f"{sum(self.server_errors.values())} answered 5xx, "
            f"{sum(self.unexpected.values())} unexpected",
            *(f"fault: {fault}" for fault in self.faults),
            f"acknowledged writes: {_counts(self.written)}",
            f"read back: {rb.memories} memories and {rb.messages} messages checked, "
            f"{len(rb.lost)} lost, {len(rb.forgotten_back)} forgets undone",
            f"done twice: summary ranges overlapping {len(store.overlapping_ranges)}, "
            f"summaries stored twice {len(store.extra_chunks)} (of {store.summaries}), "
            f"app memories written twice {len(store.app_ends_twice)}, "
            f"calls extracted twice {len(self.extracted_twice)}",
            f"app caps (cap {self.options.app_cap}): {self.store.app_counts}; app ends lost "
            f"by a live service {len(store.app_ends_missing)}, with the killed one "
            f"{store.app_ends_died}",
            f"call sessions: {_counts(self.calls)}; against the rule {len(self.rule_broken)}",
            f"jobs: failed {len(store.jobs_failed)}, stranded {len(store.jobs_stranded)}",
            f"erased user: {sum(self.erased_rows.values())} rows left "
            f"{self.erased_rows or ''}; residue scan "
            f"{'clean' if self.residue_clean else 'FOUND: ' + '; '.join(self.residue)}",
            f"keys under a former KEK after the run: {self.keys_under_former_kek}",
            *(f"service said x{n}: {line[:160]}" for line, n in self.service_warnings.items()),
            f"{self.seconds:.0f} s",
        ]

    def summary(self) -> dict[str, Any]:
        """The figures as one JSON-able object."""
        rb, store = self.read_back, self.store
        return {
            "options": asdict(self.options),
            "processes": self.processes,
            "started": self.started,
            "faults": self.faults,
            "requests_sent": self.sent,
            "requests_acknowledged": self.acknowledged,
            "requests_unanswered": sum(self.unanswered.values()),
            "responses_5xx": sum(self.server_errors.values()),
            "unexpected": sum(self.unexpected.values()),
            "acknowledged_writes": self.written,
            "acknowledged_writes_lost": len(rb.lost),
            "forgets_undone": len(rb.forgotten_back),
            "summary_ranges_overlapping": len(store.overlapping_ranges),
            "summaries_stored_twice": len(store.extra_chunks),
            "app_memories_written_twice": len(store.app_ends_twice),
            "calls_extracted_twice": len(self.extracted_twice),
            "app_memory_counts": store.app_counts,
            "app_caps_not_exact": len(self.caps_broken()),
            "call_sessions": self.calls,
            "call_sessions_against_rule": len(self.rule_broken),
            "jobs_failed": len(store.jobs_failed),
            "jobs_stranded": len(store.jobs_stranded),
            "erased_user_rows": sum(self.erased_rows.values()),
            "erased_user_residue_clean": self.residue_clean,
            "keys_under_former_kek": self.keys_under_former_kek,
            "seconds": round(self.seconds, 1),
            "problems": self.problems(),
        }


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())


class _Deployment:
    """The running processes: services by index (replaced when killed) and workers."""

    def __init__(self, env: dict[str, str], servers: int, workers: int) -> None:
        self.env = env
        self.servers = [serve(env) for _ in range(servers)]
        self.workers = [worker(env) for _ in range(workers)]
        self.every: list[ConfideProcess] = [*self.servers, *self.workers]
        self.bases = [p.wait_ready() for p in self.servers]
        for process in self.workers:
            process.wait_ready()

    def replace_server(self, index: int) -> str:
        self.servers[index] = serve(self.env)
        self.every.append(self.servers[index])
        return self.servers[index].wait_ready()

    def replace_worker(self, index: int) -> None:
        self.workers[index] = worker(self.env)
        self.every.append(self.workers[index])
        self.workers[index].wait_ready()

    def stop(self) -> None:
        for process in self.every:
            process.stop()


def run_scaleout(
    options: ScaleoutOptions,
    *,
    storage_url: str,
    keystore_url: str,
    home: Path,
    progress: Callable[[str], None] | None = None,
) -> ScaleoutReport:
    """Run the scenario on the (migrated, empty) PostgreSQL database ``storage_url`` with
    its key store at ``keystore_url`` and the processes' home (key files) at ``home``.

    The PostgreSQL server must run on this host with ``wal_recycle = off`` and be readable
    by this process (the residue scan reads its files).
    """
    say = progress or (lambda line: None)
    started = time.monotonic()
    report = ScaleoutReport(options=options)
    storage = open_storage(storage_url, pool_max=2)
    try:
        token = ApiKeys.over(storage).create(ACCOUNT, scope="admin")
    finally:
        storage.close()
    model = ScaleoutModel()
    settings = Settings(
        home=home, storage_url=storage_url, keystore_url=keystore_url, embedder="none"
    )
    with ScriptedLLMServer(responder=model) as llm, ExitStack() as stack:
        env = confide_env(
            {
                "CONFIDE_HOME": str(home),
                "CONFIDE_STORAGE_URL": storage_url,
                "CONFIDE_KEYSTORE_URL": keystore_url,
                "CONFIDE_EMBEDDER": "none",
                "CONFIDE_LLM_BASE_URL": llm.base_url,
                "CONFIDE_LLM_MODEL": "scripted",
                "CONFIDE_MIN_SESSION_SECONDS": "0",
                "CONFIDE_SUMMARY_TRIGGER": str(options.summary_trigger),
                "CONFIDE_SUMMARY_BATCH": str(options.summary_batch),
                "CONFIDE_APP_MEMORY_CAP": str(options.app_cap),
                "CONFIDE_POSTGRES_POOL_MAX": str(options.pool_max),
                "CONFIDE_WORKER_POLL_SECONDS": "0.2",
                # Short, so a job the killed worker held is taken again within the run.
                "CONFIDE_WORKER_LEASE_SECONDS": "5",
                "CONFIDE_WORKER_BACKOFF_SECONDS": "1",
            }
        )
        deployment = _Deployment(env, options.servers, options.workers)
        stack.callback(deployment.stop)
        report.processes = {
            "serve": options.servers,
            "worker": options.workers,
            "postgresql": 1,
        }
        say(f"{options.servers} services and {options.workers} workers ready")
        engine = MemoryEngine.open(settings)
        stack.callback(engine.close)
        cluster = Cluster(deployment.bases)
        ledger = Ledger()
        users = [f"user-{n:03d}" for n in range(options.users)]
        erased = users[0]
        apps = [f"app-{n}" for n in range(options.apps)]
        quiet: set[str] = set()
        locks = {user: threading.Lock() for user in users}
        clients = [
            Client(
                n,
                users[n :: options.clients],
                cluster=cluster,
                token=token,
                ledger=ledger,
                ops=options.ops,
                apps=apps,
                weights=options.weights,
                seed=options.seed * 1000 + n,
                quiet=quiet,
                user_locks=locks,
            )
            for n in range(options.clients)
        ]
        threads = [threading.Thread(target=c.run, name=f"client-{c.n}") for c in clients]
        for thread in threads:
            thread.start()
        total = options.ops * options.clients
        killed: set[tuple[int, int]] = set()
        erasures: list[tuple[ErasedUser, list[str], bool]] = []

        def erase() -> str:
            erasures.append(_erase(engine, model, cluster, token, ledger, erased, quiet, locks))
            _, keys, in_flight = erasures[0]
            during = "during" if in_flight else "NOT during"
            return (
                f"erased {erased} over HTTP ({len(keys)} key destroyed), {during} the "
                "extraction of their last call on another service"
            )

        def kill() -> str:
            return _kill(deployment, cluster, killed, server=1, worker=0)

        faults: list[tuple[float, Callable[[], str]]] = [
            (options.erase_at, erase),
            (options.rotate_at, lambda: _rotate(env)),
            (options.kill_at, kill),
        ]

        def inject(share: float, fault: Callable[[], str]) -> None:
            # Each fault in a thread of its own, at its share of the load: a slow one (the
            # erasure's scrub, the rotation's process) does not put off the next.
            _wait_for(lambda: ledger.ops >= share * total, threads)
            at = ledger.ops
            try:
                done = fault()
            except Exception as exc:  # reported, and the run fails
                done = f"{fault.__name__} FAILED: {exc!r}"
                report.client_errors.append(done)
            with ledger.lock:
                report.faults.append(done)
            say(f"{done} (from {at}/{total} operations)")

        injectors = [threading.Thread(target=inject, args=fault, name="fault") for fault in faults]
        for thread in injectors:
            thread.start()
        for thread in injectors:
            thread.join()
        for thread in threads:
            thread.join()
        report.client_errors += [f"client {c.n}: {c.error!r}" for c in clients if c.error]
        say(f"load done: {ledger.sent} requests; reading back")
        report.read_back = read_back(cluster.live(), token, ledger, erased=erased)
        for process in deployment.servers:  # their background work finishes first
            process.stop()
        load_done = time.time()
        _drain(engine, load_done, options.drain_seconds)
        deployment.stop()
        say("every process stopped; checking the store")
        report.store = check_store(
            engine,
            ledger,
            erased=erased,
            cap=options.app_cap,
            apps=apps,
            killed=killed,
            now=load_done,
        )
        erasure, key_ids, _ = erasures[0] if erasures else (None, [], False)
        memory_ids = [] if erasure is None else [r.id for r in erasure.rows]
        for name, url in (("data", storage_url), ("keys", keystore_url)):
            for table, n in owner_rows(url, erased, memory_ids).items():
                report.erased_rows[f"{name}:{table}"] = n
        ring = load_keyring(settings)
        if erasure is not None:
            carved = residue(engine, erasure, key_ids, [ring.primary, *ring.former.values()])
            report.residue_clean = carved.clean
            report.residue = [] if carved.clean else carved.lines()
        usage = engine.key_store.kek_usage()
        report.keys_under_former_kek = sum(n for k, n in usage.items() if k != ring.primary_id)
        warnings = Counter(w for p in deployment.every for w in p.warnings)
        report.service_warnings = dict(warnings.most_common(8))
        report.started = {
            "serve": len(deployment.servers) + len(killed),
            "worker": len(deployment.workers) + len(killed),
        }
    report.sent, report.acknowledged = ledger.sent, ledger.acknowledged
    report.unanswered = dict(ledger.unanswered)
    report.server_errors = dict(ledger.server_errors)
    report.unexpected = dict(ledger.unexpected)
    report.written = {
        "memories": len(ledger.memories),
        "chat messages": len(ledger.messages),
        "app ends": len(ledger.app_ends),
        "calls": ledger.calls_answered,
    }
    report.calls = {
        "answered by their own service": ledger.calls_answered,
        "refused with 409 elsewhere": ledger.held_elsewhere,
        "lost with the killed service": ledger.calls_lost,
    }
    report.rule_broken = list(ledger.rule_broken)
    report.extracted_twice = sorted(t for t, n in model.extractions.items() if n > 1)
    report.seconds = time.monotonic() - started
    return report


def _wait_for(condition: Callable[[], bool], threads: list[threading.Thread]) -> None:
    """Poll ``condition`` until it holds or every client thread has ended."""
    while not condition() and any(t.is_alive() for t in threads):
        threads[0].join(0.05)


def _erase(
    engine: MemoryEngine,
    model: ScaleoutModel,
    cluster: Cluster,
    token: str,
    ledger: Ledger,
    user: str,
    quiet: set[str],
    locks: dict[str, threading.Lock],
) -> tuple[ErasedUser, list[str], bool]:
    """Stop the user's traffic, end a last call of theirs on the last service, and erase
    them over HTTP (on the first) while that call's extraction waits for the model.

    Returns what was stored of the user before, the key ids destroyed and whether the
    extraction was in flight during the erasure.
    """
    quiet.add(user)
    with locks[user]:  # the user's operation in flight, if any, is over
        pass
    tag = new_call_tag()
    model.hold(tag)
    last = Client(
        len(cluster) - 1,
        [user],
        cluster=cluster,
        token=token,
        ledger=ledger,
        ops=0,
        apps=[],
        weights={},
        seed=0,
        quiet=set(),
        user_locks=locks,
    )
    try:
        last.call(user, tag=tag, realtime=False)
    finally:
        last.http.close()
    in_flight = model.wait_asked(tag, 60)
    erased = ErasedUser.snapshot(
        engine, user, {f"conv-{user}"}, list(ledger.sent_texts.get(user, []))
    )
    picked = cluster.pick(0)
    assert picked is not None
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=600) as http:
            response = http.delete(f"{picked[1]}/v1/users/{user}")
    finally:
        model.release(tag)
    with ledger.lock:
        ledger.sent += 1
        if response.is_success:
            ledger.acknowledged += 1
        elif response.status_code >= 500:
            ledger.server_errors[f"DELETE /v1/users/{{id}} {response.status_code}"] += 1
        else:
            ledger.unexpected[f"DELETE /v1/users/{{id}} {response.status_code}"] += 1
    receipt = response.json() if response.is_success else {}
    return erased, [str(k) for k in receipt.get("key_ids_destroyed", [])], in_flight


def _rotate(env: dict[str, str]) -> str:
    """``confide keys rotate`` in a process of its own, while the others run."""
    done = subprocess.run(
        [sys.executable, "-c", "from confide.cli import main; main()", "keys", "rotate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        return f"KEK rotation FAILED ({done.returncode}): {done.stderr.strip()[-300:]}"
    return f"rotated the KEK with confide keys rotate: {done.stdout.strip()}"


def _kill(
    deployment: _Deployment,
    cluster: Cluster,
    killed: set[tuple[int, int]],
    *,
    server: int,
    worker: int,
) -> str:
    """SIGKILL a service and a worker mid-load, then start them again."""
    server = server % len(deployment.servers)
    killed.add((server, cluster.generation[server]))
    deployment.servers[server].kill()
    cluster.down(server)
    deployment.workers[worker].kill()
    cluster.up(server, deployment.replace_server(server))
    deployment.replace_worker(worker)
    return f"SIGKILL of service {server} and worker {worker}, both started again"


def _drain(engine: MemoryEngine, due_by: float, seconds: float) -> None:
    """Wait (up to ``seconds``) until the workers finished every job due by ``due_by``."""
    queue = SqlJobTables(engine.storage.database)
    deadline = time.monotonic() + seconds
    waiting = (JobState.QUEUED, JobState.RUNNING)
    while time.monotonic() < deadline:
        if not any(j.run_at <= due_by and j.state in waiting for j in queue.jobs()):
            return
        threading.Event().wait(0.2)  # polling the queue: the workers are other processes
