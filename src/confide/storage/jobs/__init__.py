"""The background job queue, kept in the store: rows, role protocols and their SQL.

Why a queue of our own: the PostgreSQL job libraries (procrastinate, pgqueuer, ...) are
PostgreSQL-only, and Confide's workers must run the same way on SQLite, proven by the same
conformance suite. What is needed is small: a ``jobs`` table, a claim that is a lease, and
completion only by the lease's holder. This module is that, written once in ``?``-style SQL
for both backends.

A job row holds ids and kinds only (never a memory value, a message or a prompt): the
``payload`` is a small JSON object of identifiers, checked by :func:`check_payload`.

Leases: :meth:`JobTables.claim` hands each due job to one worker with a fresh lease token
and an expiry. On PostgreSQL the claim takes its rows ``FOR UPDATE SKIP LOCKED``, so
workers on several hosts never wait for or take each other's rows; on SQLite it runs inside
one write transaction (writes are serialised). A job whose lease expired (its worker died)
is claimable again. Every claim counts as an attempt, so a job that keeps killing its worker
gives up after ``max_attempts`` like one that keeps raising. Completion, renewal and retry
name the lease token and are refused (``False``) once the lease moved to another claim, so a
stale worker can never finish a job another worker has taken. :meth:`JobTables.complete_job`
marks a job done inside a caller's own write transaction, so a handler's effects and the
job's completion commit together (or the whole transaction rolls back when the lease was
lost, see :class:`LeaseLostError`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confide.errors import ConflictError, ValidationError
from confide.storage.database import Database, Statements, TransactionStatements
from confide.storage.schema import Feature, Migration, account_policy

__all__ = [
    "JOBS_FEATURE",
    "JobRow",
    "JobState",
    "JobTables",
    "Lease",
    "LeaseLostError",
    "SqlJobTables",
    "check_payload",
]

PAYLOAD_MAX_CHARS = 2_000
"""The largest payload a job may carry (JSON): ids and kinds, never content."""
_ID_MAX_CHARS = 256


class JobState:
    """The states of a job row."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class LeaseLostError(ConflictError):
    """The job's lease was taken by another claim (it expired): this worker's work is void."""


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as stored."""

    id: str
    kind: str
    account_id: str | None
    payload: dict[str, Any]
    dedupe_key: str
    state: str
    attempts: int
    max_attempts: int
    run_at: float
    lease_owner: str | None
    lease_token: str | None
    lease_until: float | None
    last_error: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class Lease:
    """A claimed job: the row as claimed and the token that proves the claim."""

    job: JobRow
    token: str
    worker_id: str
    until: float

    @property
    def job_id(self) -> str:
        """The claimed job's id."""
        return self.job.id


def check_payload(payload: Mapping[str, Any]) -> str:
    """``payload`` as stored JSON; raises :class:`ValidationError` unless it is a flat object of
    short scalars (ids, kinds, counts): a job row must never carry user content."""
    for name, value in payload.items():
        if not isinstance(name, str) or len(name) > 64:
            raise ValidationError("job payload names must be strings of at most 64 characters")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ValidationError(f"job payload {name!r} must be an id, a kind or a number")
        if isinstance(value, str) and len(value) > _ID_MAX_CHARS:
            raise ValidationError(f"job payload {name!r} is longer than an id")
    text = json.dumps(dict(payload), sort_keys=True)
    if len(text) > PAYLOAD_MAX_CHARS:
        raise ValidationError("job payload is too large")
    return text


_COLUMNS = (
    "id, kind, account_id, payload, dedupe_key, state, attempts, max_attempts, run_at, "
    "lease_owner, lease_token, lease_until, last_error, created_at, updated_at"
)


def _job(values: Sequence[Any]) -> JobRow:
    (
        job_id,
        kind,
        account_id,
        payload,
        dedupe_key,
        state,
        attempts,
        max_attempts,
        run_at,
        owner,
        token,
        until,
        error,
        created,
        updated,
    ) = values
    return JobRow(
        id=str(job_id),
        kind=str(kind),
        account_id=account_id,
        payload=json.loads(payload),
        dedupe_key=str(dedupe_key),
        state=str(state),
        attempts=int(attempts),
        max_attempts=int(max_attempts),
        run_at=float(run_at),
        lease_owner=owner,
        lease_token=token,
        lease_until=None if until is None else float(until),
        last_error=error,
        created_at=float(created),
        updated_at=float(updated),
    )


def _update_leased(
    db: Statements,
    lease: Lease,
    assignments: str,
    params: Sequence[Any],
    *,
    states: Sequence[str] = (JobState.RUNNING,),
    returning: str = "",
) -> Any:
    """``UPDATE jobs SET <assignments>`` on the leased job, only while ``lease`` is still the
    job's claim: the row holds its token and is in one of ``states``. Returns the cursor
    (``rowcount`` 0, or no returned row, when the lease was lost)."""
    marks = ", ".join("?" for _ in states)
    return db.run(
        f"UPDATE jobs SET {assignments} WHERE id = ? AND lease_token = ? AND state IN ({marks})"
        + (f" RETURNING {returning}" if returning else ""),
        [*params, lease.job_id, lease.token, *states],
    )


def _complete(db: Statements, lease: Lease, now: float) -> bool:
    # A job this lease already completed stays done: completing it again is a no-op.
    cursor = _update_leased(
        db,
        lease,
        "state = ?, lease_until = NULL, last_error = NULL, updated_at = ?",
        [JobState.DONE, now],
        states=(JobState.RUNNING, JobState.DONE),
    )
    return int(cursor.rowcount) == 1


class JobTables(Protocol):
    """The job queue: enqueue, claim, renew, complete, retry."""

    def enqueue(
        self,
        kind: str,
        *,
        account_id: str | None,
        payload: Mapping[str, Any],
        run_at: float,
        now: float,
        dedupe_key: str | None = None,
        max_attempts: int = 5,
        while_queued: bool = False,
    ) -> str | None:
        """Add a job; its id, or ``None`` when a job with ``dedupe_key`` already exists.

        With ``while_queued`` the key only dedupes against a job still queued: a running or
        finished job with it gives the key up (it may have read its data before this write),
        so a burst of triggers queues one job and a trigger after it started queues another.
        """
        ...

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        now: float,
        kinds: Sequence[str] | None = None,
        limit: int = 1,
    ) -> list[Lease]:
        """Lease up to ``limit`` due jobs of ``kinds`` (``None``: any kind) to ``worker_id``,
        oldest due first: queued ones whose ``run_at`` has come, and running ones whose
        lease expired. Each claim counts as an attempt; a job whose lease expired after its
        last allowed attempt is marked failed instead."""
        ...

    def renew(self, lease: Lease, *, lease_seconds: float, now: float) -> bool:
        """Extend a lease still held; False when it was lost."""
        ...

    def complete(self, lease: Lease, now: float) -> bool:
        """Mark the job done; False when the lease was lost (another worker has it)."""
        ...

    def complete_job(self, tx: TransactionStatements, lease: Lease, now: float) -> None:
        """Mark the leased job done with the other writes of ``tx`` (a caller's own write
        transaction, such as the memory transaction ``commit_batch(within=...)`` hands over).

        Raises :class:`LeaseLostError` (rolling the transaction back) when the lease is no
        longer this claim's; completing a job this lease already completed is a no-op.
        """
        ...

    def retry(self, lease: Lease, *, error: str, run_at: float, now: float) -> str | None:
        """Put a failed attempt back to run at ``run_at`` (``error``: a type name only), or
        mark it failed after its last attempt; the new state, ``None`` when the lease was
        lost."""
        ...

    def postpone(self, lease: Lease, *, run_at: float, now: float) -> bool:
        """Put a job back without counting the attempt (e.g. over the token budget)."""
        ...

    def get_job(self, job_id: str) -> JobRow | None:
        """One job by id."""
        ...

    def jobs(self, *, kind: str | None = None, state: str | None = None) -> list[JobRow]:
        """Jobs, oldest first, of one kind and state when given (for status and tests)."""
        ...

    def prune_jobs(self, finished_before: float) -> int:
        """Delete done and failed jobs last changed before ``finished_before``."""
        ...

    def account_ids(self, *, limit: int = 10_000) -> list[str]:
        """Accounts that have active memories, sorted (for per-account schedules)."""
        ...


class SqlJobTables:
    """:class:`JobTables` over a SQL storage (its reader and its transactions)."""

    def __init__(self, storage: Database) -> None:
        self._storage = storage
        # PostgreSQL: workers never wait for or take rows another claim holds; SQLite
        # serialises write transactions, so a claim there has no one to skip.
        self._claim_suffix = " FOR UPDATE SKIP LOCKED" if storage.dialect == "postgres" else ""

    @staticmethod
    def complete_job(tx: TransactionStatements, lease: Lease, now: float) -> None:
        """Mark the leased job done with ``tx``'s other writes."""
        if not _complete(tx, lease, now):
            raise LeaseLostError(f"job {lease.job_id}: the lease was taken by another worker")

    def enqueue(
        self,
        kind: str,
        *,
        account_id: str | None,
        payload: Mapping[str, Any],
        run_at: float,
        now: float,
        dedupe_key: str | None = None,
        max_attempts: int = 5,
        while_queued: bool = False,
    ) -> str | None:
        """See :meth:`JobTables.enqueue`."""
        if not kind or len(kind) > 64:
            raise ValidationError("job kind must be 1-64 characters")
        if max_attempts < 1:
            raise ValidationError("max_attempts must be at least 1")
        text = check_payload(payload)
        job_id = str(uuid.uuid4())
        with self._storage.transaction() as tx:
            tx.across_accounts()
            if while_queued and dedupe_key is not None:
                # A job past its queued state keeps its row under its own id as key.
                tx.run(
                    "UPDATE jobs SET dedupe_key = id WHERE dedupe_key = ? AND state <> ?",
                    [dedupe_key, JobState.QUEUED],
                )
            cursor = tx.run(
                f"INSERT INTO jobs ({_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, 0, ?, ?, NULL, NULL, NULL, NULL, ?, ?) "
                "ON CONFLICT (dedupe_key) DO NOTHING",
                [
                    job_id,
                    kind,
                    account_id,
                    text,
                    dedupe_key or job_id,
                    JobState.QUEUED,
                    max_attempts,
                    run_at,
                    now,
                    now,
                ],
            )
        return job_id if int(cursor.rowcount) == 1 else None

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float,
        now: float,
        kinds: Sequence[str] | None = None,
        limit: int = 1,
    ) -> list[Lease]:
        """See :meth:`JobTables.claim`."""
        if not self._any_due(now):
            return []  # an idle poll costs a read, not a write transaction
        until = now + lease_seconds
        token = str(uuid.uuid4())
        only = ""
        kind_params: list[Any] = []
        if kinds is not None:
            if not kinds:
                return []
            only = f" AND kind IN ({', '.join('?' for _ in kinds)})"
            kind_params = list(kinds)
        with self._storage.transaction() as tx:
            tx.across_accounts()
            # A worker that died on its last allowed attempt: the job gives up.
            tx.run(
                "UPDATE jobs SET state = ?, last_error = ?, lease_until = NULL, updated_at = ? "
                "WHERE id IN (SELECT id FROM jobs WHERE state = ? AND lease_until <= ? "
                f"AND attempts >= max_attempts{self._claim_suffix})",
                [JobState.FAILED, "LeaseExpired", now, JobState.RUNNING, now],
            )
            rows = tx.run(
                "UPDATE jobs SET state = ?, attempts = attempts + 1, lease_owner = ?, "
                "lease_token = ?, lease_until = ?, updated_at = ? WHERE id IN ("
                "SELECT id FROM jobs WHERE ((state = ? AND run_at <= ?) "
                f"OR (state = ? AND lease_until <= ?)){only} ORDER BY run_at, created_at LIMIT ?"
                f"{self._claim_suffix}) RETURNING {_COLUMNS}",
                [
                    JobState.RUNNING,
                    worker_id,
                    token,
                    until,
                    now,
                    JobState.QUEUED,
                    now,
                    JobState.RUNNING,
                    now,
                    *kind_params,
                    limit,
                ],
            ).fetchall()
        jobs = sorted((_job(r) for r in rows), key=lambda j: (j.run_at, j.created_at))
        return [Lease(job, token, worker_id, until) for job in jobs]

    def _any_due(self, now: float) -> bool:
        with self._storage.reader_across_accounts() as db:
            row = db.run(
                "SELECT 1 FROM jobs WHERE (state = ? AND run_at <= ?) "
                "OR (state = ? AND lease_until <= ?) LIMIT 1",
                [JobState.QUEUED, now, JobState.RUNNING, now],
            ).fetchone()
        return row is not None

    def renew(self, lease: Lease, *, lease_seconds: float, now: float) -> bool:
        """Extend a lease still held; False when it was lost."""
        return self._while_held(
            lease, "lease_until = ?, updated_at = ?", [now + lease_seconds, now]
        )

    def complete(self, lease: Lease, now: float) -> bool:
        """Mark the job done; False when the lease was lost (another worker has it)."""
        with self._storage.transaction() as tx:
            tx.across_accounts()
            return _complete(tx, lease, now)

    def retry(self, lease: Lease, *, error: str, run_at: float, now: float) -> str | None:
        """See :meth:`JobTables.retry`."""
        with self._storage.transaction() as tx:
            tx.across_accounts()
            row = _update_leased(
                tx,
                lease,
                "state = CASE WHEN attempts >= max_attempts THEN ? ELSE ? END, "
                "run_at = ?, lease_until = NULL, last_error = ?, updated_at = ?",
                [JobState.FAILED, JobState.QUEUED, run_at, error[:64], now],
                returning="state",
            ).fetchone()
        return None if row is None else str(row[0])

    def postpone(self, lease: Lease, *, run_at: float, now: float) -> bool:
        """Put a job back without counting the attempt (e.g. over the token budget)."""
        return self._while_held(
            lease,
            "state = ?, attempts = attempts - 1, run_at = ?, lease_until = NULL, updated_at = ?",
            [JobState.QUEUED, run_at, now],
        )

    def _while_held(self, lease: Lease, assignments: str, params: Sequence[Any]) -> bool:
        """One :func:`_update_leased` in its own transaction; False when the lease was lost."""
        with self._storage.transaction() as tx:
            tx.across_accounts()
            cursor = _update_leased(tx, lease, assignments, params)
        return int(cursor.rowcount) == 1

    def get_job(self, job_id: str) -> JobRow | None:
        """One job by id."""
        with self._storage.reader_across_accounts() as db:
            row = db.run(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", [job_id]).fetchone()
        return None if row is None else _job(row)

    def jobs(self, *, kind: str | None = None, state: str | None = None) -> list[JobRow]:
        """Jobs, oldest first, of one kind and state when given."""
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE 1 = 1"
        params: list[Any] = []
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if state is not None:
            sql += " AND state = ?"
            params.append(state)
        with self._storage.reader_across_accounts() as db:
            rows = db.run(sql + " ORDER BY created_at, id", params).fetchall()
        return [_job(r) for r in rows]

    def prune_jobs(self, finished_before: float) -> int:
        """Delete done and failed jobs last changed before ``finished_before``."""
        with self._storage.transaction() as tx:
            tx.across_accounts()
            cursor = tx.run(
                "DELETE FROM jobs WHERE state IN (?, ?) AND updated_at < ?",
                [JobState.DONE, JobState.FAILED, finished_before],
            )
        return int(cursor.rowcount)

    def account_ids(self, *, limit: int = 10_000) -> list[str]:
        """Accounts that have active memories, sorted (for per-account schedules)."""
        with self._storage.reader_across_accounts() as db:
            rows = db.run(
                "SELECT DISTINCT account_id FROM memories WHERE state = ? "
                "ORDER BY account_id LIMIT ?",
                ["active", limit],
            ).fetchall()
        return [str(r[0]) for r in rows]


def jobs_ddl(real: str) -> tuple[str, ...]:
    """The ``jobs`` table (ids and kinds only, never user content)."""
    return (
        f"""CREATE TABLE IF NOT EXISTS jobs (
            id TEXT PRIMARY KEY, kind TEXT NOT NULL, account_id TEXT,
            payload TEXT NOT NULL, dedupe_key TEXT NOT NULL UNIQUE, state TEXT NOT NULL,
            attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, run_at {real} NOT NULL,
            lease_owner TEXT, lease_token TEXT, lease_until {real}, last_error TEXT,
            created_at {real} NOT NULL, updated_at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS jobs_due ON jobs (state, run_at)",
        "CREATE INDEX IF NOT EXISTS jobs_lease ON jobs (state, lease_until)",
    )


JOBS_FEATURE = Feature(
    name="jobs",
    migrations=(
        Migration(
            version=1,
            name="job-queue",
            sqlite=jobs_ddl("REAL"),
            postgres=jobs_ddl("DOUBLE PRECISION"),
        ),
        Migration(
            version=2,
            name="row-level-security",
            sqlite=(),
            postgres=account_policy("jobs", rows_without_account=True),
        ),
    ),
)
"""The background job queue (ids and kinds only; erasure removes the jobs naming a user
through :mod:`confide.storage.derived`)."""
