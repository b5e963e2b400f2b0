"""What the scaled-out run left, read back: acknowledged writes over HTTP, then (once every
process has stopped) the database's summaries, app scopes, jobs, the erased user's rows and
what of them can be carved from the files.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import httpx

from confide.chat.history import CHUNK_CATEGORY
from confide.crypto.envelope import Envelope
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage.base import MemoryRow
from confide.storage.chat import MessageRow, SqlMessageTables
from confide.storage.jobs import JobState, SqlJobTables
from confide.testing.forensics import CarveReport, carve
from confide.testing.scaleout.traffic import ACCOUNT, AppEnd, Ledger
from confide.types import MemoryFilter, MemoryState

__all__ = [
    "ErasedUser",
    "ReadBack",
    "StoreCheck",
    "check_store",
    "owner_rows",
    "read_back",
    "residue",
]

_EVERY_STATE = (MemoryState.ACTIVE, MemoryState.SOFT_DELETED, MemoryState.SUPERSEDED)
KEPT_BY_ERASURE = frozenset({"key_generations"})
"""Tables whose row of an erased user the erasure keeps: its key generation, bumped so that
a process still caching a destroyed key cannot write under it (an id and two numbers)."""


@dataclass
class ReadBack:
    """Acknowledged writes read back over HTTP after the run."""

    memories: int = 0
    """Acknowledged memories checked (the erased user's left out)."""
    messages: int = 0
    """Acknowledged chat messages checked (the erased user's left out)."""
    lost: list[str] = field(default_factory=list)
    """One line per acknowledged write missing or changed (goal: none)."""
    forgotten_back: list[str] = field(default_factory=list)
    """Acknowledged forgets whose memory reads as active (goal: none)."""
    errors: Counter[str] = field(default_factory=Counter)
    """Reads answered with an error (5xx included)."""


def read_back(bases: Sequence[str], token: str, ledger: Ledger, *, erased: str) -> ReadBack:
    """Read every acknowledged memory and chat message back, spread over ``bases``.

    A memory reads as its last acknowledged value (or one an unanswered update may have
    written), active unless an acknowledged forget forgot it; an acknowledged message reads
    at its index with its content. ``erased``'s writes are not checked: they are gone.
    """
    out = ReadBack()
    turn = itertools.cycle(bases)
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        for record in ledger.memories:
            if record.user == erased:
                continue
            out.memories += 1
            response = http.get(f"{next(turn)}/v1/memories/{record.first_id}/current")
            if response.status_code != 200:
                out.errors[f"GET /v1/memories/{{id}}/current {response.status_code}"] += 1
                out.lost.append(f"memory {record.first_id}: {response.status_code}")
                continue
            body = response.json()
            active = body["state"] == MemoryState.ACTIVE
            if record.forgotten and record.settled:
                if active:
                    out.forgotten_back.append(f"memory {record.first_id} is active")
                continue
            if not active and not (record.doubt_forgotten or record.forgotten):
                out.lost.append(f"memory {record.first_id}: {body['state']}")
            elif body["value"] != record.value and body["value"] not in record.doubt:
                out.lost.append(f"memory {record.first_id}: another value")
        conversations = {(m.user, m.conversation_id) for m in ledger.messages if m.user != erased}
        for user, conversation in sorted(conversations):
            stored = _messages(http, next(turn), user, conversation, out)
            for message in ledger.messages:
                if message.conversation_id != conversation:
                    continue
                out.messages += 1
                if stored.get(message.index) != message.content:
                    out.lost.append(f"message {conversation}#{message.index}")
    return out


def _messages(
    http: httpx.Client, base: str, user: str, conversation: str, out: ReadBack
) -> dict[int, str]:
    found: dict[int, str] = {}
    cursor: int | None = None
    while True:
        params: dict[str, str | int] = {"user_id": user, "limit": 200}
        if cursor is not None:
            params["cursor"] = cursor
        response = http.get(f"{base}/v1/conversations/{conversation}/messages", params=params)
        if response.status_code != 200:
            out.errors[f"GET /v1/conversations/{{id}}/messages {response.status_code}"] += 1
            return found
        page = response.json()
        found.update({int(m["index"]): str(m["content"]) for m in page["messages"]})
        cursor = page["next_cursor"]
        if cursor is None:
            return found


@dataclass
class StoreCheck:
    """The database once every process stopped: work done once, caps kept, jobs finished."""

    summaries: int = 0
    """Rolling summaries stored, over every conversation."""
    overlapping_ranges: list[str] = field(default_factory=list)
    """Conversations whose summarised ranges overlap (a range summarised twice; goal none)."""
    extra_chunks: list[str] = field(default_factory=list)
    """Conversations with more summary memories than recorded ranges (goal none)."""
    app_counts: dict[str, int] = field(default_factory=dict)
    """App → active memories (goal: exactly its cap, once it had that many ends)."""
    app_ends_twice: list[str] = field(default_factory=list)
    """App conversations whose memory was written more than once (goal none)."""
    app_ends_missing: list[str] = field(default_factory=list)
    """Accepted ends, by a service that lived on, whose memory was never written (goal none)."""
    app_ends_died: int = 0
    """Accepted ends whose service was killed before it wrote their memory (allowed: the
    answer was 202, a promise the killed process could not keep)."""
    jobs_failed: list[str] = field(default_factory=list)
    """Jobs marked failed, by kind (goal none)."""
    jobs_stranded: list[str] = field(default_factory=list)
    """Jobs due and still queued or running after the drain (goal none)."""


def check_store(
    engine: MemoryEngine,
    ledger: Ledger,
    *,
    erased: str,
    cap: int,
    apps: Sequence[str],
    killed: Collection[tuple[int, int]],
    now: float,
) -> StoreCheck:
    """Summaries, app scopes and the job queue as the run left them.

    ``killed`` names the services killed, as ``(index, generation)`` of the process that
    died; ``now`` is when the load ended (jobs due by then must be finished).
    """
    out = StoreCheck()
    chats = SqlMessageTables(engine.storage)
    conversations = {(m.user, m.conversation_id) for m in ledger.messages if m.user != erased}
    for user, conversation in sorted(conversations):
        ranges = chats.summaries(ACCOUNT, conversation)
        out.summaries += len(ranges)
        ordered = sorted((r.range_start, r.range_end) for r in ranges)
        if any(b[0] < a[1] for a, b in itertools.pairwise(ordered)):
            out.overlapping_ranges.append(conversation)
        chunks = engine.list_memories(
            MemoryFilter(
                account_id=ACCOUNT, user_id=user, categories=(CHUNK_CATEGORY,), states=_EVERY_STATE
            ),
            limit=10_000,
        )
        mine = [c for c in chunks if c.metadata.get("conversation_id") == conversation]
        if len({c.lineage_id for c in mine}) > len(ranges):
            out.extra_chunks.append(conversation)
    ends = {e.conversation_id: e for e in ledger.app_ends}
    for app in apps:
        scope = MemoryFilter(account_id=ACCOUNT, user_id=f"app:{app}", app_id=app)
        out.app_counts[app] = len(engine.list_memories(scope, limit=10_000))
        every = engine.list_memories(
            scope.model_copy(update={"states": _EVERY_STATE}), limit=10_000
        )
        lineages: dict[str, set[str]] = {}
        for memory in every:
            conversation = str(memory.metadata.get("conversation_id"))
            lineages.setdefault(conversation, set()).add(memory.lineage_id or memory.id)
        out.app_ends_twice += [f"{app}/{c}" for c, ids in lineages.items() if len(ids) > 1]
        for end in (e for e in ends.values() if e.app_id == app):
            if end.conversation_id in lineages:
                continue
            if _died(end, killed):
                out.app_ends_died += 1
            else:
                out.app_ends_missing.append(f"{app}/{end.conversation_id}")
    for job in SqlJobTables(engine.storage.database).jobs():
        if job.state == JobState.FAILED:
            out.jobs_failed.append(job.kind)
        elif job.run_at <= now and job.state in (JobState.QUEUED, JobState.RUNNING):
            out.jobs_stranded.append(job.kind)
    del cap
    return out


def _died(end: AppEnd, killed: Collection[tuple[int, int]]) -> bool:
    return (end.server, end.generation) in killed


@dataclass
class ErasedUser:
    """The erased user as stored just before the erasure: their sealed rows and keys, and
    every text sent for them (the needles of the residue scan)."""

    user_id: str
    rows: list[MemoryRow]
    messages: list[MessageRow]
    key_ids: list[str]
    wrapped_keys: list[bytes]
    texts: list[str]

    @classmethod
    def snapshot(
        cls, engine: MemoryEngine, user_id: str, conversations: Collection[str], texts: list[str]
    ) -> ErasedUser:
        """Read the user's rows, messages and key (before erasing them)."""
        rows = list(engine.storage.iter_owner(ACCOUNT, user_id))
        chats = SqlMessageTables(engine.storage)
        messages = [m for c in conversations for m in chats.recent(ACCOUNT, c, limit=100_000)]
        key = engine.key_store.get(ACCOUNT, user_id, "user")
        return cls(
            user_id=user_id,
            rows=rows,
            messages=messages,
            key_ids=[] if key is None else [key.key_id],
            wrapped_keys=[] if key is None else [key.wrapped],
            texts=list(texts),
        )


def owner_rows(url: str, user_id: str, memory_ids: Collection[str]) -> dict[str, int]:
    """Rows of ``user_id`` (of :data:`ACCOUNT`) in every table of the database at ``url``
    (its ``search_path`` schema), by table: any with its ``user_id``, naming one of
    ``memory_ids``, or with the user's id in any text column (a scope, a payload, a
    conversation id made from it); goal after erasure: none.

    Found by the tables' columns, not by a list the erasure keeps, so a table the erasure
    does not know of is counted too; :data:`KEPT_BY_ERASURE` is left out. Read as a
    superuser (row security does not hide rows).
    """
    import psycopg

    ids = sorted(memory_ids)
    mention = "%" + user_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    counts: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        columns: dict[str, dict[str, str]] = {}
        for table, column, kind in conn.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema "
            "AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE' "
            "WHERE c.table_schema = current_schema()"
        ).fetchall():
            columns.setdefault(str(table), {})[str(column)] = str(kind)
        for table, names in sorted(columns.items()):
            if table in KEPT_BY_ERASURE:
                continue
            where: list[str] = []
            params: list[object] = []
            if "user_id" in names:
                where.append("user_id = %s")
                params.append(user_id)
            for column in ("memory_id", "from_id", "to_id"):
                if column in names and ids:
                    where.append(f"{column} = ANY(%s)")
                    params.append(ids)
            for column, kind in names.items():
                if kind in ("text", "character varying", "json", "jsonb") and column != "user_id":
                    where.append(f'"{column}"::text LIKE %s')
                    params.append(mention)
            if not where:
                continue
            sql = f'SELECT count(*) FROM "{table}" WHERE ' + " OR ".join(where)
            found = int(conn.execute(sql, params).fetchone()[0])  # type: ignore[index]
            if found:
                counts[table] = found
    return counts


def residue(
    engine: MemoryEngine, erased: ErasedUser, key_ids: Collection[str], keks: Sequence[bytes]
) -> CarveReport:
    """Carve the data and key store's files for what the erased user left: their
    ciphertexts, wrapped keys, key ids and clear texts, and any window after a key id that
    unwraps as their key under any of ``keks`` (every KEK the run used)."""
    needles: dict[str, bytes] = {}
    for message in erased.messages:
        needles[f"message ciphertext {message.index}"] = message.ciphertext
        needles[f"message wrapped data key {message.index}"] = message.wrapped_key
    for row in erased.rows:
        needles[f"ciphertext of {row.id[:8]}"] = row.ciphertext
        needles[f"wrapped data key of {row.id[:8]}"] = row.wrapped_key
    every_id = sorted({*erased.key_ids, *key_ids})
    for key_id in every_id:
        needles[f"key id {key_id[:8]}"] = key_id.encode()
    for n, wrapped in enumerate(erased.wrapped_keys):
        needles[f"wrapped user key {n}"] = wrapped
    for n, text in enumerate(erased.texts):
        needles[f"clear text {n}"] = text.encode()
    files = [*engine.storage.data_files(), *engine.key_store.data_files()]
    total = CarveReport(files=len(files))
    for n, kek in enumerate(keks):
        report = carve(
            files,
            envelope=Envelope(engine.envelope.cipher, KeyRing(primary=kek)),
            account_id=ACCOUNT,
            user_id=erased.user_id,
            key_ids=every_id,
            needles=needles if n == 0 else {},
            sealed=erased.rows,
            open_value=lambda row, key: engine.codec.contents(row, key),
        )
        total.found.update(report.found)
        total.unwrapped_keys += report.unwrapped_keys
        total.decrypted_values += report.decrypted_values
    return total
