"""What the consolidation job keeps beside the memories: judged pairs and retrieval counts.

A judged pair is kept as a fingerprint (a digest of the two memory ids and their rounded
similarity) with its verdict and when it was judged, so the job neither judges a pair again
within its recheck period nor judges more pairs a day than its cap; no memory text and no
id in clear. The retrieval count (``access_count`` of a memory version, raised by
``Storage.touch``) names a user's most retrieved memories.

As for app scopes, the SQL is written once with ``?`` placeholders and shared by both SQL
backends (``SqlConsolidationTables(storage.database)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from confide.storage.database import Database
from confide.storage.schema import Feature, Migration, account_policies

__all__ = ["CONSOLIDATION_FEATURE", "ConsolidationTables", "SqlConsolidationTables"]


class ConsolidationTables(Protocol):
    """Judged pairs and retrieval counts of the consolidation job."""

    def judged(
        self, account_id: str, user_id: str, fingerprints: Sequence[str]
    ) -> dict[str, float]:
        """When each of ``fingerprints`` the user has was last judged (those never judged
        are left out)."""
        ...

    def record_judged(
        self, account_id: str, user_id: str, verdicts: Sequence[tuple[str, str]], ts: float
    ) -> None:
        """Record ``(fingerprint, verdict)`` pairs as judged at ``ts`` (replacing older ones)."""
        ...

    def judged_since(self, account_id: str, user_id: str, since: float) -> int:
        """How many of the user's pairs were judged at or after ``since``."""
        ...

    def forget_judged(self, account_id: str, user_id: str, before: float) -> int:
        """Drop the user's fingerprints judged before ``before``; how many were dropped."""
        ...

    def most_retrieved(self, account_id: str, user_id: str, limit: int) -> list[str]:
        """Ids of the user's ``limit`` most retrieved active memories (retrieved at least
        once), most retrieved first."""
        ...


_CHUNK = 500


class SqlConsolidationTables:
    """:class:`ConsolidationTables` over a SQL storage (its reader and its transactions)."""

    def __init__(self, storage: Database) -> None:
        self._storage = storage

    def judged(
        self, account_id: str, user_id: str, fingerprints: Sequence[str]
    ) -> dict[str, float]:
        """When each of ``fingerprints`` the user has was last judged."""
        found: dict[str, float] = {}
        with self._storage.reader(account_id) as db:
            for start in range(0, len(fingerprints), _CHUNK):
                chunk = list(fingerprints[start : start + _CHUNK])
                marks = ", ".join("?" for _ in chunk)
                rows = db.run(
                    "SELECT fingerprint, checked_at FROM consolidation_pairs "
                    f"WHERE account_id = ? AND user_id = ? AND fingerprint IN ({marks})",
                    [account_id, user_id, *chunk],
                ).fetchall()
                found.update((str(r[0]), float(r[1])) for r in rows)
        return found

    def record_judged(
        self, account_id: str, user_id: str, verdicts: Sequence[tuple[str, str]], ts: float
    ) -> None:
        """Record ``(fingerprint, verdict)`` pairs as judged at ``ts``."""
        if not verdicts:
            return
        with self._storage.transaction() as tx:
            tx.scope_to(account_id)
            for fingerprint, verdict in verdicts:
                tx.run(
                    "INSERT INTO consolidation_pairs "
                    "(account_id, user_id, fingerprint, verdict, checked_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, user_id, fingerprint) "
                    "DO UPDATE SET verdict = excluded.verdict, checked_at = excluded.checked_at",
                    [account_id, user_id, fingerprint, verdict, ts],
                )

    def judged_since(self, account_id: str, user_id: str, since: float) -> int:
        """How many of the user's pairs were judged at or after ``since``."""
        with self._storage.reader(account_id) as db:
            row = db.run(
                "SELECT COUNT(*) FROM consolidation_pairs "
                "WHERE account_id = ? AND user_id = ? AND checked_at >= ?",
                [account_id, user_id, since],
            ).fetchone()
        return int(row[0])

    def forget_judged(self, account_id: str, user_id: str, before: float) -> int:
        """Drop the user's fingerprints judged before ``before``."""
        with self._storage.transaction() as tx:
            tx.scope_to(account_id)
            cursor = tx.run(
                "DELETE FROM consolidation_pairs "
                "WHERE account_id = ? AND user_id = ? AND checked_at < ?",
                [account_id, user_id, before],
            )
        return int(cursor.rowcount)

    def most_retrieved(self, account_id: str, user_id: str, limit: int) -> list[str]:
        """Ids of the user's ``limit`` most retrieved active memories."""
        if limit <= 0:
            return []
        with self._storage.reader(account_id) as db:
            rows = db.run(
                "SELECT id FROM memories WHERE account_id = ? AND user_id = ? "
                "AND access_count > 0 AND state = 'active' AND app_id IS NULL "
                "ORDER BY access_count DESC, id LIMIT ?",
                [account_id, user_id, limit],
            ).fetchall()
        return [str(r[0]) for r in rows]


def _consolidation(real: str) -> tuple[str, ...]:
    # One row per judged pair's fingerprint (no memory text, not even the ids in clear).
    return (
        f"""CREATE TABLE IF NOT EXISTS consolidation_pairs (
            account_id TEXT NOT NULL, user_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
            verdict TEXT NOT NULL, checked_at {real} NOT NULL,
            PRIMARY KEY (account_id, user_id, fingerprint))""",
        "CREATE INDEX IF NOT EXISTS consolidation_pairs_checked "
        "ON consolidation_pairs (account_id, user_id, checked_at)",
    )


CONSOLIDATION_FEATURE = Feature(
    name="consolidation",
    migrations=(
        Migration(
            version=1,
            name="consolidation",
            sqlite=_consolidation("REAL"),
            postgres=_consolidation("DOUBLE PRECISION"),
        ),
        Migration(
            version=2,
            name="row-level-security",
            sqlite=(),
            postgres=account_policies("consolidation_pairs"),
        ),
    ),
    owner_tables=("consolidation_pairs",),
)
"""The consolidation job's judged pairs (the retrieval counts are the memory store's)."""
