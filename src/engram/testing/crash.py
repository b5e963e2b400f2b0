"""Crash safety: ``kill -9`` of ``engram serve`` during concurrent writes, then check the store.

A round starts ``engram serve`` (plus any other process given, such as a background worker),
sends writes over HTTP from many concurrent clients (new memories, and updates of ones
acknowledged earlier in the round), and kills every process with ``SIGKILL`` once a chosen
number of writes has been acknowledged, while the rest are in flight. The next round
restarts the service on the same database. After each restart :func:`check_store` runs the
database's own integrity check and the consistency queries; at the end every acknowledged
write must read back with the value sent.

``tests/e2e/test_crash.py`` runs a few short rounds per backend; ``bench/crash.py`` runs ten
rounds of 1,000 writes and prints the counts.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from engram.config import Settings
from engram.engine import MemoryEngine
from engram.errors import NotFoundError
from engram.server.auth import ApiKeys
from engram.storage import open_storage
from engram.storage.base import Storage
from engram.storage.keystore import KeyStore, open_key_store
from engram.storage.sql import SqlStorage
from engram.testing.processes import EngramProcess, serve

try:
    # The SQLite library Engram's storage uses: two copies of SQLite in one process do not
    # see each other's file locks, and closing one's handle drops the other's locks.
    import pysqlite3.dbapi2 as sqlite3
except ImportError:  # pragma: no cover - platforms without the wheel
    import sqlite3

__all__ = [
    "Ack",
    "CrashReport",
    "RoundResult",
    "StoreCheck",
    "check_store",
    "crash_rounds",
    "write_until_killed",
]

ACCOUNT = "acct-crash"
USERS = 8
UPDATE_SHARE = 0.2
_NOUNS = ("garden", "harbour", "violin", "orchard", "lighthouse", "bakery", "canal", "meadow")

ProcessFactory = Callable[[Mapping[str, str]], EngramProcess]
"""Starts one more process beside ``engram serve`` on the same environment (and database);
it is killed at the same moment. The hook for a background worker process."""


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged write: the memory version the answer named, and the value sent."""

    memory_id: str
    value: str


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
class CrashReport:
    """Every round of a crash run, and the final reading of what was acknowledged."""

    rounds: list[RoundResult]
    checks: list[StoreCheck]
    acknowledged: int
    present: int
    """Acknowledged writes found, with the value sent."""

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
) -> RoundResult:
    """Send ``writes`` writes from ``concurrency`` clients; call ``kill`` (which must end the
    service at once) when ``kill_after`` have been acknowledged.

    A share of the writes update a memory acknowledged earlier in the round; the rest store
    new memories for one of a few users. Once ``kill`` has run no new write starts.
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
        if result.acks and rng.random() < UPDATE_SHARE:
            target = rng.choice(result.acks)
            route = "PATCH /v1/memories/{id}"
            request = client.patch(f"/v1/memories/{target.memory_id}", json={"value": value})
        else:
            route = "POST /v1/memories"
            body = {"user_id": f"user-{n % USERS}", "key": f"note_{tag}_{n}", "value": value}
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
            acknowledged(Ack(str(response.json()["id"]), value))
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
    with storage.reader() as db:
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
    with storage.reader() as db:
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


def crash_rounds(
    *,
    settings: Settings,
    env: Mapping[str, str],
    rounds: int,
    writes: int,
    concurrency: int,
    seed: int = 0,
    also: Sequence[ProcessFactory] = (),
    progress: Callable[[str], None] | None = None,
) -> CrashReport:
    """Run ``rounds`` kill rounds against the store ``settings`` names, then read back.

    ``env`` is the environment of ``engram serve`` (the same store and key as
    ``settings``). Each round kills the processes after a random share (10 to 90%) of its
    ``writes`` were acknowledged; ``also`` starts more processes to kill with the service
    (e.g. a background worker). Raises :class:`RuntimeError` if a process does not start.
    """
    rng = random.Random(seed)
    storage_url = settings.resolved_storage_url()
    keys_url = settings.resolved_keystore_url()
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
                break

            def kill_all(victims: list[EngramProcess] = processes) -> None:
                for victim in victims:
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
                )
            )
            result.server_warnings = [w for p in processes for w in p.warnings]
            results.append(result)
            if progress is not None:
                progress(
                    f"round {n + 1}: {len(result.acks)} acknowledged, "
                    f"{result.lost_in_flight} in flight at the kill"
                )
        finally:
            for process in processes:
                process.stop()
    acks = [a for r in results for a in r.acks]
    return CrashReport(
        rounds=results, checks=checks, acknowledged=len(acks), present=present(settings, acks)
    )
