"""Crash safety: ``kill -9`` of ``confide serve`` during concurrent writes, then check the store.

A round starts ``confide serve`` (plus any other process given, such as a background worker),
sends writes over HTTP from many concurrent clients (new memories, and updates of ones
acknowledged earlier in the round), and kills every process with ``SIGKILL`` once a chosen
number of writes has been acknowledged, while the rest are in flight. The next round
restarts the service on the same database. After each restart :func:`check_store` runs the
database's own integrity check and the consistency queries; at the end every acknowledged
write must read back with the value sent.

``tests/e2e/test_crash.py`` runs a few short rounds per backend; ``bench/crash.py`` runs ten
rounds of 1,000 writes and prints the counts.

With ``worker=True`` a background worker runs and is killed with the service: on SQLite the
worker thread of ``confide serve`` (the deployed shape there: one process serves the store), on
PostgreSQL an ``confide worker`` process beside it. To keep it busy at the kill, a share of the
writes are *fading* notes (importance 1) that the worker's TTL, tuned to retire what is idle
for :data:`FADE_SECONDS`, soft-deletes, and during each round a few due ``ttl`` jobs are
kept waiting in the queue. After the last restart :func:`drain_queue` waits for the live
worker to finish every due job (those held by a killed worker come back when their lease
expires) and counts what a lost or doubled job would leave (:class:`QueueCheck`).
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import NotFoundError
from confide.server.auth import ApiKeys
from confide.storage import open_storage
from confide.storage.base import Storage
from confide.storage.jobs import JobRow, JobState, SqlJobTables
from confide.storage.keystore import KeyStore, open_key_store
from confide.storage.sql import SqlStorage
from confide.testing.forensics import sentinels_in_clear
from confide.testing.processes import ConfideProcess, serve
from confide.testing.processes import worker as worker_process

try:
    # The SQLite library Confide's storage uses: two copies of SQLite in one process do not
    # see each other's file locks, and closing one's handle drops the other's locks.
    import pysqlite3.dbapi2 as sqlite3
except ImportError:  # pragma: no cover - platforms without the wheel
    import sqlite3

__all__ = [
    "FADE_SECONDS",
    "WORKER_ENV",
    "Ack",
    "CrashReport",
    "QueueCheck",
    "RoundResult",
    "StoreCheck",
    "check_store",
    "crash_rounds",
    "drain_queue",
    "write_until_killed",
]

ACCOUNT = "acct-crash"
USERS = 8
UPDATE_SHARE = 0.2
_NOUNS = ("garden", "harbour", "violin", "orchard", "lighthouse", "bakery", "canal", "meadow")

FADE_SECONDS = 1.0
"""How long a fading note stays idle before the worker's TTL may retire it."""
FADE_SHARE = 0.3
"""The share of new memories written as fading notes when a worker runs."""
_BACKLOG = 20
"""Due ``ttl`` jobs kept waiting for the worker during a round."""
_BACKLOG_CHECK = 0.02
_LEASE_SECONDS = 2.0
WORKER_ENV = {
    "CONFIDE_WORKER_POLL_SECONDS": "0.05",
    # Short, so a job held by a killed worker is taken again within the check's wait.
    "CONFIDE_WORKER_LEASE_SECONDS": str(_LEASE_SECONDS),
    "CONFIDE_WORKER_BACKOFF_SECONDS": "0.5",
    "CONFIDE_TTL_IDLE_DAYS": repr(FADE_SECONDS / 86_400.0),
}
"""The background worker's settings in a crash run (both the service and the worker get them)."""

ProcessFactory = Callable[[Mapping[str, str]], ConfideProcess]
"""Starts one more process beside ``confide serve`` on the same environment (and database);
it is killed at the same moment. The hook for a background worker process."""


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged write: the memory version the answer named, and the value sent."""

    memory_id: str
    value: str
    fading: bool = False
    """A note of importance 1 that the worker's TTL retires once idle (never updated)."""


@dataclass
class RoundResult:
    """What one round's clients saw."""

    attempted: int = 0
    acks: list[Ack] = field(default_factory=list)
    lost_in_flight: int = 0
    """Writes whose answer never came (the process was killed): each may or may not be stored."""
    conflicts: int = 0
    """Updates refused because another update of the same memory won first (409)."""
    errors: list[str] = field(default_factory=list)
    """Answers that should not happen before the kill (status and route; never values)."""
    server_warnings: list[str] = field(default_factory=list)
    """Warning and error lines the killed processes wrote (to explain ``errors``)."""
    worker_killed: bool = False
    """A background worker (thread or process) was killed with the service."""
    held_job_ids: set[str] = field(default_factory=set)
    """Jobs a killed worker held (claimed, running) at the kill."""

    @property
    def jobs_held(self) -> int:
        """How many jobs the killed worker held at the kill."""
        return len(self.held_job_ids)


@dataclass
class StoreCheck:
    """The store after a restart: the integrity check and the consistency counts."""

    integrity: list[str]
    """Problems the database's own check reported (empty: it passed)."""
    orphans: dict[str, int]
    """Rows without what they belong to, or missing what belongs to them, by kind."""
    unused_keys: int
    """User keys of users without a memory (a kill between making a user's key and its first
    write leaves one; no data depends on it)."""

    @property
    def orphaned(self) -> int:
        """Every orphan of every kind."""
        return sum(self.orphans.values())


@dataclass
class QueueCheck:
    """The job queue once a live worker has drained it after the last restart."""

    due: int
    """Jobs due by the final sweep's time (every round's, and the schedules')."""
    stranded: int
    """Of those, jobs still queued or claimed when the wait ended (goal 0)."""
    failed: int
    """Jobs marked failed (their attempts used up; goal 0)."""
    rerun: int
    """Jobs claimed more than once (taken again after a kill, or retried)."""
    ttl_twice: int
    """Memories with more than one ``TTL`` history event or change-log entry (goal 0: a
    job done again must change nothing)."""
    fading_not_retired: int
    """Acknowledged fading notes the final sweep left active (goal 0)."""
    retired: int
    """Memories with their ``TTL`` event."""

    @property
    def problems(self) -> int:
        """Every count whose goal is 0."""
        return self.stranded + self.failed + self.ttl_twice + self.fading_not_retired


@dataclass
class CrashReport:
    """Every round of a crash run, and the final reading of what was acknowledged."""

    rounds: list[RoundResult]
    checks: list[StoreCheck]
    acknowledged: int
    present: int
    """Acknowledged writes found, with the value sent."""
    queue: QueueCheck | None = None
    """The job queue after the last restart (``None``: no worker ran)."""
    values_in_clear: int = 0
    """Acknowledged values found in clear in the store's or key store's files (WAL
    included) after the last restart: the sentinel check (goal 0)."""

    @property
    def worker_kills(self) -> int:
        """Rounds that killed a background worker with the service."""
        return sum(r.worker_killed for r in self.rounds)

    @property
    def jobs_held(self) -> int:
        """Distinct jobs the killed workers held at their kills, over every round (a job
        taken again after one kill may be held at the next kill too: it counts once)."""
        return len(set().union(*(r.held_job_ids for r in self.rounds)))

    @property
    def orphaned(self) -> int:
        """Orphans found by the last check."""
        return self.checks[-1].orphaned if self.checks else 0

    @property
    def integrity_failures(self) -> int:
        """Checks the database's own integrity check failed."""
        return sum(1 for c in self.checks if c.integrity)

    @property
    def errors(self) -> list[str]:
        """Unexpected answers across rounds."""
        return [e for r in self.rounds for e in r.errors]


async def write_until_killed(
    base_url: str,
    token: str,
    *,
    writes: int,
    concurrency: int,
    kill_after: int,
    kill: Callable[[], None],
    seed: int,
    tag: str,
    fading: float = 0.0,
) -> RoundResult:
    """Send ``writes`` writes from ``concurrency`` clients; call ``kill`` (which must end the
    service at once) when ``kill_after`` have been acknowledged.

    A share of the writes update a memory acknowledged earlier in the round; the rest store
    new memories for one of a few users: a ``fading`` share of them with importance 1 (the
    TTL may retire them; never updated), the rest with importance 3 (the TTL keeps them).
    Once ``kill`` has run no new write starts.
    """
    rng = random.Random(seed)
    result = RoundResult()
    killed = asyncio.Event()
    auth = {"Authorization": f"Bearer {token}"}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(writes):
        queue.put_nowait(n)

    def acknowledged(ack: Ack) -> None:
        result.acks.append(ack)
        if len(result.acks) >= kill_after and not killed.is_set():
            killed.set()
            kill()

    async def one(client: httpx.AsyncClient, n: int) -> None:
        value = (
            f"Round {tag} note {n}: the {rng.choice(_NOUNS)} by the {rng.choice(_NOUNS)} "
            f"opens at {rng.randint(5, 11)} every {rng.choice(('Monday', 'Friday', 'Sunday'))}."
        )
        kept = [a for a in result.acks if not a.fading]
        fade = False
        if kept and rng.random() < UPDATE_SHARE:
            target = rng.choice(kept)
            route = "PATCH /v1/memories/{id}"
            request = client.patch(f"/v1/memories/{target.memory_id}", json={"value": value})
        else:
            route = "POST /v1/memories"
            fade = rng.random() < fading
            body = {
                "user_id": f"user-{n % USERS}",
                "key": f"{'fade' if fade else 'note'}_{tag}_{n}",
                "value": value,
                "importance": 1 if fade else 3,
            }
            request = client.post("/v1/memories", json=body)
        result.attempted += 1
        try:
            response = await request
        except httpx.TransportError as exc:
            if not killed.is_set():
                result.errors.append(f"{route}: {type(exc).__name__} before the kill")
            result.lost_in_flight += 1
            return
        if response.status_code in (200, 201):
            acknowledged(Ack(str(response.json()["id"]), value, fade))
        elif response.status_code == 409 and route.startswith("PATCH"):
            result.conflicts += 1
        elif not killed.is_set():
            result.errors.append(f"{route}: {response.status_code}")

    async def client_loop(client: httpx.AsyncClient) -> None:
        while not killed.is_set():
            try:
                n = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await one(client, n)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base_url, headers=auth, timeout=120, limits=limits
    ) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(concurrency)))
    if not killed.is_set():  # every write answered before the threshold: kill anyway
        kill()
    return result


def _sqlite_integrity(path: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        problems = [p for p in problems if p != "ok"]
        problems += [f"foreign key: {r}" for r in conn.execute("PRAGMA foreign_key_check")]
    finally:
        conn.close()
    return problems


# Consistency queries, one SQL text for both dialects: each counts rows that lack what they
# belong to, or lack what belongs to them.
_ORPHAN_QUERIES = {
    "memories_without_history": "SELECT count(*) FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM history h WHERE h.memory_id = m.id)",
    "history_without_memory": "SELECT count(*) FROM history h WHERE NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = h.memory_id)",
    "active_memories_without_tokens": "SELECT count(*) FROM memories m WHERE m.state = 'active' "
    "AND NOT EXISTS (SELECT 1 FROM memory_tokens t WHERE t.memory_id = m.id)",
    "tokens_without_memory": "SELECT count(*) FROM memory_tokens t WHERE NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = t.memory_id)",
    "tokens_of_superseded_memories": "SELECT count(*) FROM memory_tokens t JOIN memories m "
    "ON m.id = t.memory_id WHERE m.state = 'superseded'",
    "relations_without_memory": "SELECT count(*) FROM relations r WHERE NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = r.from_id) OR NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = r.to_id)",
    "changes_without_memory": "SELECT count(*) FROM changes c WHERE NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = c.memory_id)",
}
_VECTOR_QUERIES = {
    "active_memories_without_vector": "SELECT count(*) FROM memories m WHERE m.state = 'active' "
    "AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.memory_id = m.id)",
    "vectors_without_memory": "SELECT count(*) FROM embeddings e WHERE NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = e.memory_id)",
    "vectors_of_superseded_memories": "SELECT count(*) FROM embeddings e JOIN memories m "
    "ON m.id = e.memory_id WHERE m.state = 'superseded'",
}
# PostgreSQL checks its B-tree indexes against their tables (amcheck, shipped with the server).
_PG_INDEXES = (
    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE a.amname = 'btree' AND n.nspname = current_schema() AND i.indisvalid"
)


def _postgres_integrity(storage: SqlStorage) -> list[str]:
    problems: list[str] = []
    with storage.transaction() as tx:
        tx.run("CREATE EXTENSION IF NOT EXISTS amcheck")
    with storage.reader_across_accounts() as db:
        names = [str(r[0]) for r in db.run(_PG_INDEXES).fetchall()]
        for name in names:
            try:
                db.run("SELECT bt_index_check(?::regclass, true)", [name]).fetchall()
            except Exception as exc:  # the check raises on a corrupt index
                problems.append(f"index {name}: {type(exc).__name__}")
    return problems


def check_store(storage_url: str, key_store_url: str) -> StoreCheck:
    """The database's integrity check and the consistency counts of the store at
    ``storage_url`` (its user keys at ``key_store_url``).

    SQLite: ``PRAGMA integrity_check`` and ``foreign_key_check`` of both files. PostgreSQL:
    ``amcheck``'s ``bt_index_check`` of every B-tree index (heap included). Both: every
    memory version has its history, every active one its search terms (and vector, when
    the store has them) and its user key; no history, search term, vector, relation or
    change-log row is without its memory; a superseded version keeps no index rows.
    """
    storage = open_storage(storage_url, pool_max=2)
    key_store = open_key_store(key_store_url)
    try:
        return _check(storage, key_store, storage_url, key_store_url)
    finally:
        key_store.close()
        storage.close()


def _check(storage: Storage, key_store: KeyStore, url: str, keys_url: str) -> StoreCheck:
    if not isinstance(storage, SqlStorage):
        raise TypeError(f"the crash check reads SQL stores, not {storage.name}")
    integrity: list[str] = []
    if url.startswith("sqlite:///"):
        integrity += _sqlite_integrity(url.removeprefix("sqlite:///"))
    else:
        integrity += _postgres_integrity(storage)
    if keys_url.startswith("sqlite:///"):
        integrity += [f"keys: {p}" for p in _sqlite_integrity(keys_url.removeprefix("sqlite:///"))]
    queries = dict(_ORPHAN_QUERIES)
    if storage.embedder_spec() is not None:  # the store keeps vectors
        queries.update(_VECTOR_QUERIES)
    with storage.reader_across_accounts() as db:
        orphans = {name: int(db.run(sql).fetchone()[0]) for name, sql in queries.items()}
        used = {
            (str(a), str(u), str(k))
            for a, u, k in db.run(
                "SELECT DISTINCT account_id, user_id, key_id FROM memories"
            ).fetchall()
        }
    keys = key_store.rows(limit=10_000_000)
    held = {row.key_id for row in keys}
    orphans["memories_without_key"] = sum(1 for _, _, key_id in used if key_id not in held)
    owners = {(a, u) for a, u, _ in used}
    unused = sum(
        1 for row in keys if row.purpose == "user" and (row.account_id, row.user_id) not in owners
    )
    return StoreCheck(integrity=integrity, orphans=orphans, unused_keys=unused)


def present(settings: Settings, acks: Sequence[Ack]) -> int:
    """How many acknowledged writes read back (opened with the service's key) as sent."""
    engine = MemoryEngine.open(settings)
    try:
        found = 0
        for ack in acks:
            try:
                memory = engine.get(ack.memory_id, account_id=ACCOUNT)
            except NotFoundError:
                continue
            found += memory.value == ack.value
        return found
    finally:
        engine.close()


class _Backlog:
    """Keeps :data:`_BACKLOG` ``ttl`` jobs due in the queue from :meth:`start` to :meth:`stop`
    (the hourly schedule at a faster clock, as a worker behind on its queue sees it): the
    worker is in the middle of a job, not idle, whenever the kill comes;
    :meth:`wait_until_held` lets the kill wait for a moment the worker holds one."""

    def __init__(self, storage_url: str, tag: str) -> None:
        self._storage = open_storage(storage_url, pool_max=3)
        self._tag = tag
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crash-backlog", daemon=True)
        self.queued = 0
        self.error: str | None = None
        """The type of the error that stopped the top-ups early, if any."""

    def start(self) -> None:
        """Start topping the queue up."""
        self._thread.start()

    def stop(self) -> None:
        """Stop, wait for the last enqueue to end, and close the store."""
        self._stop.set()
        self._thread.join()
        self._storage.close()

    def wait_until_held(self, timeout: float = 2.0) -> bool:
        """Return once a worker holds a live lease on a job (or ``timeout`` passed); whether
        one does. Polls the queue: the worker runs in another process or thread."""
        queue = SqlJobTables(self._storage.database)
        deadline = time.monotonic() + timeout
        while True:
            now = time.time()
            running = queue.jobs(state=JobState.RUNNING)
            if any(j.lease_until is not None and j.lease_until > now for j in running):
                return True
            if time.monotonic() >= deadline:
                return False

    def _run(self) -> None:
        try:
            queue = SqlJobTables(self._storage.database)
            while not self._stop.is_set():
                now = time.time()
                waiting = sum(1 for j in queue.jobs(state=JobState.QUEUED) if j.run_at <= now)
                for _ in range(_BACKLOG - waiting):
                    queue.enqueue(
                        "ttl",
                        account_id=None,
                        payload={},
                        run_at=now,
                        now=now,
                        dedupe_key=f"ttl:crash:{self._tag}:{self.queued}",
                        max_attempts=10,
                    )
                    self.queued += 1
                self._stop.wait(_BACKLOG_CHECK)  # pacing the top-ups, not a synchronisation
        except Exception as exc:  # the kill leaves the store usable: nothing should raise
            self.error = type(exc).__name__


def _jobs_held(storage_url: str, killed_at: float) -> set[str]:
    """Ids of the jobs a kill at ``killed_at`` left claimed (their lease still live at that
    moment); read while every worker is dead."""
    storage = open_storage(storage_url, pool_max=2)
    try:
        running = SqlJobTables(storage.database).jobs(state=JobState.RUNNING)
        return {j.id for j in running if j.lease_until is not None and j.lease_until > killed_at}
    finally:
        storage.close()


_TTL_TWICE = (
    "SELECT count(*) FROM (SELECT memory_id FROM history WHERE event = 'TTL' "
    "GROUP BY memory_id HAVING count(*) > 1) h",
    "SELECT count(*) FROM (SELECT memory_id FROM changes WHERE event = 'TTL' "
    "GROUP BY memory_id HAVING count(*) > 1) c",
)
_RETIRED = "SELECT DISTINCT memory_id FROM history WHERE event = 'TTL'"


def drain_queue(
    storage_url: str, acks: Sequence[Ack], *, timeout: float = 180.0, poll: float = 0.2
) -> QueueCheck:
    """With a worker running on the store, queue a final ``ttl`` sweep due once every
    acknowledged fading note is idle past :data:`FADE_SECONDS`, wait (up to ``timeout``)
    until every job due by then is finished, and count what is left.

    A job a killed worker held is claimed again once its lease expires; one that never
    finishes is *stranded*. Each retired memory must carry one ``TTL`` event (a job run
    again after a kill changes nothing twice), and every fading note its own.
    """
    storage = open_storage(storage_url, pool_max=2)
    if not isinstance(storage, SqlStorage):
        storage.close()
        raise TypeError(f"the crash check reads SQL stores, not {storage.name}")
    try:
        queue = SqlJobTables(storage.database)
        now = time.time()
        sweep_at = now + FADE_SECONDS + 0.5  # every note acknowledged before now is idle by then
        queue.enqueue(
            "ttl",
            account_id=None,
            payload={},
            run_at=sweep_at,
            now=now,
            dedupe_key="ttl:crash:final",
            max_attempts=10,
        )
        finished = (JobState.DONE, JobState.FAILED)

        def due() -> list[JobRow]:
            return [job for job in queue.jobs() if job.run_at <= sweep_at]

        deadline = time.monotonic() + timeout
        jobs = due()
        while any(j.state not in finished for j in jobs) and time.monotonic() < deadline:
            time.sleep(poll)  # polling the queue's state: the worker runs in another process
            jobs = due()
        with storage.reader_across_accounts() as db:
            twice = sum(int(db.run(sql).fetchone()[0]) for sql in _TTL_TWICE)
            retired = {str(r[0]) for r in db.run(_RETIRED).fetchall()}
    finally:
        storage.close()
    return QueueCheck(
        due=len(jobs),
        stranded=sum(1 for j in jobs if j.state not in finished),
        failed=sum(1 for j in jobs if j.state == JobState.FAILED),
        rerun=sum(1 for j in jobs if j.attempts > 1),
        ttl_twice=twice,
        fading_not_retired=sum(1 for a in acks if a.fading and a.memory_id not in retired),
        retired=len(retired),
    )


def crash_rounds(
    *,
    settings: Settings,
    env: Mapping[str, str],
    rounds: int,
    writes: int,
    concurrency: int,
    seed: int = 0,
    also: Sequence[ProcessFactory] = (),
    worker: bool = False,
    progress: Callable[[str], None] | None = None,
) -> CrashReport:
    """Run ``rounds`` kill rounds against the store ``settings`` names, then read back.

    ``env`` is the environment of ``confide serve`` (the same store and key as
    ``settings``). Each round kills the processes after a random share (10 to 90%) of its
    ``writes`` were acknowledged; ``also`` starts more processes to kill with the service
    (e.g. a background worker). With ``worker`` a background worker runs and dies with the
    service (see the module's docstring) and the report includes the drained queue's
    :class:`QueueCheck`. Raises :class:`RuntimeError` if a process does not start.
    """
    rng = random.Random(seed)
    storage_url = settings.resolved_storage_url()
    keys_url = settings.resolved_keystore_url()
    sqlite = storage_url.startswith("sqlite:///")
    if worker:
        # SQLite: the service's own worker thread (one process serves the store); PostgreSQL:
        # an ``confide worker`` process, as deployed there.
        env = {**env, **WORKER_ENV, "CONFIDE_SERVE_WORKER": "on" if sqlite else "off"}
        if not sqlite:
            also = [*also, worker_process]
    queue: QueueCheck | None = None
    storage = open_storage(storage_url, pool_max=2)
    try:
        token = ApiKeys.over(storage).create(ACCOUNT)
    finally:
        storage.close()
    results: list[RoundResult] = []
    checks: list[StoreCheck] = []
    for n in range(rounds + 1):
        processes = [serve(env), *(start(env) for start in also)]
        try:
            base = processes[0].wait_ready()
            for process in processes[1:]:
                process.wait_ready()
            if n > 0:  # restarted after a kill: the store as the kill left it, recovered
                checks.append(check_store(storage_url, keys_url))
            if n == rounds:
                if worker:  # the live worker finishes what the killed ones held
                    queue = drain_queue(storage_url, [a for r in results for a in r.acks])
                break

            backlog = _Backlog(storage_url, f"{n}") if worker else None
            if backlog is not None:
                backlog.start()

            killed_at: list[float] = []

            def kill_all(
                victims: list[ConfideProcess] = processes,
                backlog: _Backlog | None = backlog,
                killed_at: list[float] = killed_at,
            ) -> None:
                # The service at once: the writes in flight at this instant are the ones
                # lost. Waiting first (for the worker below) let them finish meanwhile, so
                # whether any was in flight depended on the machine's speed.
                victims[0].kill()
                if backlog is not None:  # then the worker mid-job (bounded wait)
                    backlog.wait_until_held()
                killed_at.append(time.time())
                for victim in reversed(victims[1:]):
                    victim.kill()

            result = asyncio.run(
                write_until_killed(
                    base,
                    token,
                    writes=writes,
                    concurrency=concurrency,
                    kill_after=rng.randint(max(1, writes // 10), max(1, writes * 9 // 10)),
                    kill=kill_all,
                    seed=rng.randrange(1 << 30),
                    tag=f"{n}",
                    fading=FADE_SHARE if worker else 0.0,
                )
            )
            result.server_warnings = [w for p in processes for w in p.warnings]
            if backlog is not None:
                backlog.stop()
                if backlog.error is not None:
                    result.errors.append(f"queueing ttl jobs: {backlog.error}")
                result.worker_killed = True
                result.held_job_ids = _jobs_held(storage_url, killed_at[0])
            results.append(result)
            if progress is not None:
                progress(
                    f"round {n + 1}: {len(result.acks)} acknowledged, "
                    f"{result.lost_in_flight} in flight at the kill"
                    + (f", {result.jobs_held} jobs held by the killed worker" if worker else "")
                )
        finally:
            for process in processes:
                process.stop()
    acks = [a for r in results for a in r.acks]
    return CrashReport(
        rounds=results,
        checks=checks,
        acknowledged=len(acks),
        present=present(settings, acks),
        queue=queue,
        values_in_clear=values_in_clear(storage_url, keys_url, acks),
    )


# Every value the rounds write has this shape (see :func:`write_until_killed`): one pass per
# file finds them all, however many were written.
_WRITTEN_VALUE = re.compile(
    rb"Round [^ \x00]{1,40} note \d+: the [a-z]+ by the [a-z]+ opens at \d+ every [A-Za-z]+\."
)


def values_in_clear(storage_url: str, key_store_url: str, acks: Sequence[Ack]) -> int:
    """How many acknowledged values are readable in clear in the files of the store and
    the key store (see :func:`~confide.testing.forensics.sentinels_in_clear`; goal 0)."""
    return sentinels_in_clear(
        storage_url, key_store_url, _WRITTEN_VALUE, [ack.value for ack in acks]
    )
