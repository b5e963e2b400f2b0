"""Scrubs owed: what an erasure, a purge or a key rotation must still clear from the files.

Deleting a row leaves its bytes in the database's files until the store is scrubbed (SQLite
folds its WAL into the zeroed database file; PostgreSQL rewrites the tables and retires its
WAL). A scrub can be refused for a while (a reader holds SQLite's WAL, the role lacks a
privilege, the server is down), so each erasure, purge and rotation records what it owes
here, and the worker retries until the scrub is complete and, where the files are readable,
a scan of them finds none of the markers. Written once in ``?``-style SQL for both backends.

A row holds no user id and no content: ``markers`` is an opaque text the engine encodes so
that the row cannot match the byte strings it describes (see
:mod:`confide.engine.residue`), and the account id is the only owner field.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from confide.storage.database import Database, ScrubOutcome
from confide.storage.schema import Feature, Migration, account_policy

__all__ = [
    "SCRUBS_FEATURE",
    "ScrubOutcome",
    "ScrubRow",
    "ScrubState",
    "ScrubTables",
    "SqlScrubTables",
]


class ScrubState:
    """The states of an owed scrub."""

    PENDING = "pending"
    """The scrub was refused or the scan found residue: the worker retries it."""
    VERIFIED = "verified"
    """Scrubbed, and a scan of the store's files found none of the markers."""
    SCRUBBED = "scrubbed"
    """Scrubbed, but the files are not readable here to verify it (or it has no markers)."""


@dataclass(frozen=True, slots=True)
class ScrubRow:
    """One owed scrub as stored."""

    id: str
    kind: str
    account_id: str | None
    state: str
    detail: str
    attempts: int
    markers: str
    created_at: float
    updated_at: float


class ScrubTables(Protocol):
    """The owed scrubs kept in a store."""

    def record(self, *, kind: str, account_id: str | None, markers: str, now: float) -> ScrubRow:
        """Record a scrub owed (pending, no attempt yet) and return it."""
        ...

    def settle(self, scrub_id: str, *, state: str, detail: str, now: float) -> None:
        """Record one attempt's outcome."""
        ...

    def get(self, scrub_id: str) -> ScrubRow | None:
        """One owed scrub by id."""
        ...

    def pending(self, *, limit: int = 100) -> list[ScrubRow]:
        """The scrubs still pending, oldest first."""
        ...


_COLUMNS = "id, kind, account_id, state, detail, attempts, markers, created_at, updated_at"


def _row(values: Any) -> ScrubRow:
    scrub_id, kind, account_id, state, detail, attempts, markers, created, updated = values
    return ScrubRow(
        str(scrub_id),
        str(kind),
        account_id,
        str(state),
        str(detail),
        int(attempts),
        str(markers),
        float(created),
        float(updated),
    )


class SqlScrubTables:
    """:class:`ScrubTables` over a SQL storage (its reader and its transactions)."""

    def __init__(self, storage: Database) -> None:
        self._storage = storage

    def record(self, *, kind: str, account_id: str | None, markers: str, now: float) -> ScrubRow:
        """See :meth:`ScrubTables.record`."""
        row = ScrubRow(
            str(uuid.uuid4()), kind, account_id, ScrubState.PENDING, "", 0, markers, now, now
        )
        with self._storage.transaction() as tx:
            tx.across_accounts()
            tx.run(
                f"INSERT INTO scrubs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row.id,
                    row.kind,
                    row.account_id,
                    row.state,
                    row.detail,
                    row.attempts,
                    row.markers,
                    row.created_at,
                    row.updated_at,
                ],
            )
        return row

    def settle(self, scrub_id: str, *, state: str, detail: str, now: float) -> None:
        """See :meth:`ScrubTables.settle`."""
        with self._storage.transaction() as tx:
            tx.across_accounts()
            tx.run(
                "UPDATE scrubs SET state = ?, detail = ?, attempts = attempts + 1, "
                "updated_at = ? WHERE id = ?",
                [state, detail, now, scrub_id],
            )

    def get(self, scrub_id: str) -> ScrubRow | None:
        """See :meth:`ScrubTables.get`."""
        with self._storage.reader_across_accounts() as db:
            found = db.run(f"SELECT {_COLUMNS} FROM scrubs WHERE id = ?", [scrub_id]).fetchone()
        return None if found is None else _row(found)

    def pending(self, *, limit: int = 100) -> list[ScrubRow]:
        """See :meth:`ScrubTables.pending`."""
        with self._storage.reader_across_accounts() as db:
            rows = db.run(
                f"SELECT {_COLUMNS} FROM scrubs WHERE state = ? ORDER BY created_at LIMIT ?",
                [ScrubState.PENDING, limit],
            ).fetchall()
        return [_row(r) for r in rows]


def _scrubs(real: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS scrubs (
            id TEXT PRIMARY KEY, kind TEXT NOT NULL, account_id TEXT, state TEXT NOT NULL,
            detail TEXT NOT NULL, attempts INTEGER NOT NULL, markers TEXT NOT NULL,
            created_at {real} NOT NULL, updated_at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS scrubs_state ON scrubs (state, created_at)",
    )


SCRUBS_FEATURE = Feature(
    name="scrubs",
    migrations=(
        Migration(
            version=1,
            name="scrubs-owed",
            # Store-wide maintenance with no user id: a purge's or a rotation's scrub has no
            # account either.
            sqlite=_scrubs("REAL"),
            postgres=(
                *_scrubs("DOUBLE PRECISION"),
                *account_policy("scrubs", rows_without_account=True),
            ),
        ),
    ),
)
"""What an erasure, a purge or a key rotation must still clear from the files."""
