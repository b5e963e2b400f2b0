"""What erasure deletes beside a user's own rows: the rows derived from the user.

A user's own rows carry their ``user_id`` and go with ``Transaction.delete_owner``. Other
rows name the user, or a conversation of theirs, without being theirs, or hold their words
under another owner:

* app memories written from the user's conversations. ``memory_sources`` records, per memory
  lineage, a keyed pseudonym of each user whose words the memory was written from (never the
  id in clear; the engine makes the pseudonym, see ``MemoryEngine.pseudonym``); a memory
  another one was merged into gets the merged one's sources too. ``deferred_work`` rows carry
  the pseudonym of the user whose ended conversation waits for the budget;
* jobs whose payload or dedupe key names the user or one of their conversations;
* the LLM usage ledger's scopes that name them (``user:<id>``, ``conversation:<id>``);
* operational events and change-log threads named after the user or their conversations.

:func:`delete_derived`, the feature's erasure hook, removes them in the erasure's transaction,
before the user's own rows go (their conversations are found from their messages and call
sessions).
Every lineage one of the user's pseudonyms is recorded for is deleted whole, with every
version, index row, audit event and change-log entry, even when other users' words were
merged into it. A ledger row stays (the account's spending does not change) without its
scope. The SQL is written once for both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from confide.storage.database import TransactionStatements
from confide.storage.schema import Derived, ErasingTransaction, Feature, Migration, account_policy

__all__ = [
    "DERIVED_FEATURE",
    "Derived",
    "add_memory_sources",
    "copy_memory_sources",
    "delete_derived",
    "memory_sources_ddl",
]

_CHUNK = 500


def _chunks(items: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield list(items[start : start + _CHUNK])


def _marks(items: Sequence[Any]) -> str:
    return ", ".join("?" for _ in items)


def _names(key: str, kind: str, account_id: str, refs: set[str]) -> bool:
    """Whether a job's dedupe key names one of ``refs`` as one of its ``:``-separated parts
    (after the usual ``<kind>:<account>:`` prefix, which names no user)."""
    rest = key.removeprefix(f"{kind}:{account_id}:")
    return any(f":{ref}:" in f":{rest}:" for ref in refs)


def add_memory_sources(
    tx: TransactionStatements, account_id: str, owner: str, lineage_id: str, sources: Sequence[str]
) -> None:
    """Record in ``tx`` (the memory transaction that writes the memory) that the memory
    ``lineage_id`` of ``owner`` was written from the words of the users these pseudonyms
    name."""
    tx.scope_to(account_id)
    for source in sorted(set(sources)):
        tx.run(
            "INSERT INTO memory_sources (account_id, user_id, lineage_id, source) "
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [account_id, owner, lineage_id, source],
        )


def copy_memory_sources(
    tx: TransactionStatements, account_id: str, from_lineage: str, to_lineage: str
) -> None:
    """Give ``to_lineage`` every source of ``from_lineage`` (it was merged into it), in the
    memory transaction ``tx`` that merges them."""
    tx.scope_to(account_id)
    tx.run(
        "INSERT INTO memory_sources (account_id, user_id, lineage_id, source) "
        "SELECT account_id, user_id, ?, source FROM memory_sources "
        "WHERE account_id = ? AND lineage_id = ? ON CONFLICT DO NOTHING",
        [to_lineage, account_id, from_lineage],
    )


def delete_derived(
    tx: ErasingTransaction, account_id: str, user_id: str, derived: Derived
) -> dict[str, int]:
    """Delete (or, for the ledger, strip) every row derived from the user; counts by
    what was removed. Call it before the user's own rows are deleted: their messages and
    call sessions say which conversations were theirs."""
    tx.scope_to(account_id)
    conversations = _conversations(tx, account_id, user_id)
    refs = {user_id, *conversations}
    counts = {
        "derived_memories": _delete_sourced_memories(tx, account_id, derived.sources),
        "deferred_work": _delete_sourced_work(tx, account_id, derived.sources),
        "jobs": _delete_jobs_naming(tx, account_id, refs),
        "llm_usage_scopes": _strip_usage_scopes(tx, account_id, refs),
    }
    threads = sorted({*derived.threads, *conversations})
    for table in ("ops_events", "changes", "thread_reads", "threads"):
        if table == "thread_reads" and not tx.has_table(table):
            continue
        removed = 0
        for chunk in _chunks(threads):
            removed += tx.run(
                f"DELETE FROM {table} WHERE account_id = ? AND thread_id IN ({_marks(chunk)})",
                [account_id, *chunk],
            ).rowcount
        counts[f"{table}_of_threads"] = removed
    return counts


def _conversations(db: ErasingTransaction, account_id: str, user_id: str) -> list[str]:
    """Ids of the user's chat conversations and call sessions."""
    found: set[str] = set()
    for table, column in (
        ("messages", "conversation_id"),
        ("conversation_summaries", "conversation_id"),
        ("call_sessions", "id"),
    ):
        if db.has_table(table):
            rows = db.run(
                f"SELECT DISTINCT {column} FROM {table} WHERE account_id = ? AND user_id = ?",
                [account_id, user_id],
            ).fetchall()
            found.update(str(r[0]) for r in rows)
    return sorted(found)


def _delete_sourced_memories(
    db: ErasingTransaction, account_id: str, sources: Sequence[str]
) -> int:
    """Delete every version of every memory written from these sources, with its index rows,
    audit events and change-log entries; how many versions."""
    if not sources or not db.has_table("memory_sources"):
        return 0
    found = db.run(
        "SELECT DISTINCT lineage_id, user_id FROM memory_sources "
        f"WHERE account_id = ? AND source IN ({_marks(sources)})",
        [account_id, *sources],
    ).fetchall()
    lineages = sorted({str(r[0]) for r in found})
    owners = sorted({str(r[1]) for r in found})
    deleted = 0
    for chunk in _chunks(lineages):
        where = f"account_id = ? AND lineage_id IN ({_marks(chunk)})"
        params = [account_id, *chunk]
        rows = db.run(f"SELECT id FROM memories WHERE {where}", params).fetchall()
        ids = [str(r[0]) for r in rows]
        for id_chunk in _chunks(ids):
            db.run(f"DELETE FROM changes WHERE memory_id IN ({_marks(id_chunk)})", id_chunk)
        db.run(f"DELETE FROM history WHERE {where}", params)
        deleted += db.delete_memories(ids)
        db.run(f"DELETE FROM memory_sources WHERE {where}", params)
    if owners and db.has_table("vector_snapshots"):
        # The owners' in-process index snapshots hold the deleted vectors (under keys that
        # live on); a snapshot is a cache: the next load reads the rows instead.
        db.run(
            f"DELETE FROM vector_snapshots WHERE account_id = ? AND user_id IN ({_marks(owners)})",
            [account_id, *owners],
        )
    return deleted


def _delete_sourced_work(db: ErasingTransaction, account_id: str, sources: Sequence[str]) -> int:
    """Delete deferred work that holds these sources' words; how many pieces."""
    if not sources:
        return 0
    return int(
        db.run(
            f"DELETE FROM deferred_work WHERE account_id = ? AND source IN ({_marks(sources)})",
            [account_id, *sources],
        ).rowcount
    )


def _delete_jobs_naming(db: ErasingTransaction, account_id: str, refs: set[str]) -> int:
    """Delete the account's jobs whose payload or dedupe key names one of ``refs``; how
    many. A job running now loses its lease: its completion rolls its own work back."""
    doomed = []
    for job_id, kind, payload, key in db.run(
        "SELECT id, kind, payload, dedupe_key FROM jobs WHERE account_id = ?", [account_id]
    ).fetchall():
        values = json.loads(payload).values()
        if any(isinstance(v, str) and v in refs for v in values) or _names(
            str(key), str(kind), account_id, refs
        ):
            doomed.append(str(job_id))
    deleted = 0
    for chunk in _chunks(doomed):
        deleted += db.run(f"DELETE FROM jobs WHERE id IN ({_marks(chunk)})", chunk).rowcount
    return deleted


def _strip_usage_scopes(db: ErasingTransaction, account_id: str, refs: set[str]) -> int:
    """Drop the scope of the account's ledger rows whose scope (``<kind>:<id>``) names one of
    ``refs``; how many rows. The rows stay: the account spent what it spent."""
    scopes = [
        str(r[0])
        for r in db.run(
            "SELECT DISTINCT scope FROM llm_usage WHERE account_id = ? AND scope IS NOT NULL",
            [account_id],
        ).fetchall()
        if str(r[0]).partition(":")[2] in refs
    ]
    stripped = 0
    for chunk in _chunks(scopes):
        stripped += db.run(
            "UPDATE llm_usage SET scope = NULL "
            f"WHERE account_id = ? AND scope IN ({_marks(chunk)})",
            [account_id, *chunk],
        ).rowcount
    return stripped


def memory_sources_ddl() -> tuple[str, ...]:
    """The sources of memories written from users' words (pseudonyms), the
    source of deferred work, and the account index erasure reads jobs by."""
    return (
        """CREATE TABLE IF NOT EXISTS memory_sources (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, lineage_id TEXT NOT NULL,
            source TEXT NOT NULL, PRIMARY KEY (account_id, lineage_id, source))""",
        "CREATE INDEX IF NOT EXISTS memory_sources_source ON memory_sources (account_id, source)",
        "CREATE INDEX IF NOT EXISTS memory_sources_owner ON memory_sources (account_id, user_id)",
        "ALTER TABLE deferred_work ADD COLUMN IF NOT EXISTS source TEXT",
        "CREATE INDEX IF NOT EXISTS jobs_account ON jobs (account_id)",
    )


DERIVED_FEATURE = Feature(
    name="derived",
    migrations=(
        Migration(
            version=1,
            name="memory-sources",
            # Which users' words an app memory was written from, as keyed pseudonyms (never the
            # ids in clear), so that erasing a user deletes the app memories derived from them;
            # deferred app work records the same for the conversation it holds.
            sqlite=memory_sources_ddl(),
            postgres=(*memory_sources_ddl(), *account_policy("memory_sources")),
        ),
    ),
    owner_tables=("memory_sources",),
    erase=delete_derived,
)
"""The provenance of memories written from users' words, and the erasure of every row
derived from a user (see the module's docstring). It migrates after the apps and jobs
features, whose tables its step indexes."""
