"""App scopes and the LLM usage ledger: rows, role protocols and their SQL.

An app's memories are ordinary memory rows whose ``app_id`` names the app; this module
keeps what is not a memory: each app's settings (display name, cap override, whether it is
uninstalled), the ledger of LLM calls and each caller's last poll of it.

:class:`AppTables` holds reads, self-contained writes, and what an app scope's compaction
runs inside the engine's memory transaction (the scope lock, the scope's count), given that
transaction (the engine's ``commit_batch(within=...)`` hands it over). Both SQL backends
share the SQL below, written once with ``?`` placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confide.storage.database import MemoryStore, TransactionStatements
from confide.storage.schema import Feature, Migration, account_policies, no_statistics

__all__ = [
    "APPS_FEATURE",
    "AppRow",
    "AppTables",
    "DeferredRow",
    "SqlAppTables",
    "UsageRow",
    "UsageTotals",
]


@dataclass(frozen=True, slots=True)
class AppRow:
    """An app's settings: display name and cap override (``None``: the defaults)."""

    account_id: str
    app_id: str
    name: str | None
    memory_cap: int | None
    created_at: float
    uninstalled_at: float | None


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One LLM call (or a batch of them) in the ledger: never a prompt or an answer."""

    account_id: str
    operation: str
    scope: str | None
    prompt_tokens: int
    completion_tokens: int
    calls: int
    cost_units: float
    ts: float


@dataclass(frozen=True, slots=True)
class DeferredRow:
    """Background work held back by the account's LLM budget; its payload sealed by the
    caller under the scope owner's key, bound to ``id``. ``source``: the keyed pseudonym of
    the user whose words the payload holds (erasing the user deletes the work)."""

    id: str
    account_id: str
    operation: str
    scope: str
    created_at: float
    key_id: str
    ciphertext: bytes
    wrapped_key: bytes
    source: str | None = None


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Ledger totals of one operation over a period."""

    operation: str
    prompt_tokens: int
    completion_tokens: int
    calls: int
    cost_units: float


class AppTables(Protocol):
    """App settings and the LLM usage ledger."""

    def get_app(self, account_id: str, app_id: str) -> AppRow | None:
        """The app's settings row, if it has one."""
        ...

    def put_app(
        self, account_id: str, app_id: str, *, name: str | None, memory_cap: int | None, ts: float
    ) -> AppRow:
        """Create or replace the app's name and cap override (installing it again)."""
        ...

    def mark_uninstalled(self, account_id: str, app_id: str, ts: float) -> AppRow:
        """Record that the app was uninstalled (creating its row when it had none)."""
        ...

    def record_usage(self, row: UsageRow) -> None:
        """Append one entry to the ledger."""
        ...

    def usage_totals(
        self, account_id: str, *, since: float | None, until: float | None = None
    ) -> list[UsageTotals]:
        """Totals per operation of the account's entries in ``[since, until)``."""
        ...

    def spent_units(self, account_id: str, since: float) -> float:
        """Cost units the account spent since ``since``."""
        ...

    def swap_poll(self, account_id: str, caller: str, now: float) -> float | None:
        """Record ``now`` as the caller's last poll; the previous one (``None``: first)."""
        ...

    def defer(self, row: DeferredRow) -> None:
        """Keep a piece of background work until the budget allows it."""
        ...

    def deferred(self, account_id: str | None, limit: int) -> list[DeferredRow]:
        """Deferred work, oldest first (of one account, or of all)."""
        ...

    def drop_deferred(self, account_id: str, work_id: str) -> bool:
        """Delete a piece of the account's deferred work once done; False when another
        worker took it."""
        ...

    def lock_app_scope(self, tx: TransactionStatements, account_id: str, app_id: str) -> None:
        """Hold off other writers of this app scope until ``tx`` ends."""
        ...

    def count_app_memories(self, tx: TransactionStatements, account_id: str, app_id: str) -> int:
        """Active memories in the scope, as ``tx`` sees them."""
        ...


_APP_COLUMNS = "account_id, app_id, name, memory_cap, created_at, uninstalled_at"
USER_SCOPE = "user:"
"""The ledger scope of work done for one user: ``user:<user_id>``."""


def _app(values: Sequence[Any]) -> AppRow:
    account_id, app_id, name, cap, created, uninstalled = values
    return AppRow(account_id, app_id, name, None if cap is None else int(cap), created, uninstalled)


class _ErasureAwareTransaction(TransactionStatements, Protocol):
    def erased_at(self, account_id: str, user_id: str) -> float | None:
        """When the user was last erased (None: never), held against an erasure until
        commit."""
        ...


class SqlAppTables:
    """:class:`AppTables` over a SQL storage (its reader and its transactions).

    Args:
        store: the memory store (the ledger asks its transactions when a user was erased).
    """

    def __init__(self, store: MemoryStore[_ErasureAwareTransaction]) -> None:
        self._store = store

    @staticmethod
    def lock_app_scope(tx: TransactionStatements, account_id: str, app_id: str) -> None:
        """Hold off other writers of this app scope until ``tx`` ends."""
        tx.scope_to(account_id)
        tx.lock(f"app-scope/{account_id}/{app_id}")

    @staticmethod
    def count_app_memories(tx: TransactionStatements, account_id: str, app_id: str) -> int:
        """Active memories in the scope, as ``tx`` sees them."""
        tx.scope_to(account_id)
        row = tx.run(
            "SELECT COUNT(*) FROM memories WHERE account_id = ? AND app_id = ? "
            "AND state = 'active'",
            [account_id, app_id],
        ).fetchone()
        return int(row[0])

    def get_app(self, account_id: str, app_id: str) -> AppRow | None:
        """The app's settings row, if it has one."""
        with self._store.database.reader(account_id) as db:
            row = db.run(
                f"SELECT {_APP_COLUMNS} FROM apps WHERE account_id = ? AND app_id = ?",
                [account_id, app_id],
            ).fetchone()
        return None if row is None else _app(row)

    def put_app(
        self, account_id: str, app_id: str, *, name: str | None, memory_cap: int | None, ts: float
    ) -> AppRow:
        """Create or replace the app's name and cap override (installing it again)."""
        with self._store.database.transaction() as tx:
            tx.scope_to(account_id)
            tx.run(
                f"INSERT INTO apps ({_APP_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL) "
                "ON CONFLICT (account_id, app_id) DO UPDATE SET name = excluded.name, "
                "memory_cap = excluded.memory_cap, uninstalled_at = NULL",
                [account_id, app_id, name, memory_cap, ts],
            )
            row = tx.run(
                f"SELECT {_APP_COLUMNS} FROM apps WHERE account_id = ? AND app_id = ?",
                [account_id, app_id],
            ).fetchone()
        return _app(row)

    def mark_uninstalled(self, account_id: str, app_id: str, ts: float) -> AppRow:
        """Record that the app was uninstalled (creating its row when it had none)."""
        with self._store.database.transaction() as tx:
            tx.scope_to(account_id)
            tx.run(
                f"INSERT INTO apps ({_APP_COLUMNS}) VALUES (?, ?, NULL, NULL, ?, ?) "
                "ON CONFLICT (account_id, app_id) "
                "DO UPDATE SET uninstalled_at = excluded.uninstalled_at",
                [account_id, app_id, ts, ts],
            )
            row = tx.run(
                f"SELECT {_APP_COLUMNS} FROM apps WHERE account_id = ? AND app_id = ?",
                [account_id, app_id],
            ).fetchone()
        return _app(row)

    def record_usage(self, row: UsageRow) -> None:
        """Append one entry to the ledger.

        An entry scoped to a user (``user:<id>``) who was erased since the call began
        (``row.ts``) is written without its scope: the erasure cleared the scopes written
        until then, and a call under way at the erasure records itself only after it.
        """
        with self._store.transaction() as tx:
            tx.scope_to(row.account_id)
            scope = row.scope
            if scope is not None and scope.startswith(USER_SCOPE):
                erased = tx.erased_at(row.account_id, scope.removeprefix(USER_SCOPE))
                if erased is not None and erased >= row.ts:
                    scope = None
            tx.run(
                "INSERT INTO llm_usage (account_id, operation, scope, prompt_tokens, "
                "completion_tokens, calls, cost_units, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row.account_id,
                    row.operation,
                    scope,
                    row.prompt_tokens,
                    row.completion_tokens,
                    row.calls,
                    row.cost_units,
                    row.ts,
                ],
            )

    def usage_totals(
        self, account_id: str, *, since: float | None, until: float | None = None
    ) -> list[UsageTotals]:
        """Totals per operation of the account's entries in ``[since, until)``."""
        sql = (
            "SELECT operation, SUM(prompt_tokens), SUM(completion_tokens), SUM(calls), "
            "SUM(cost_units) FROM llm_usage WHERE account_id = ?"
        )
        params: list[Any] = [account_id]
        if since is not None:
            sql += " AND ts >= ?"
            params.append(since)
        if until is not None:
            sql += " AND ts < ?"
            params.append(until)
        with self._store.database.reader(account_id) as db:
            rows = db.run(sql + " GROUP BY operation ORDER BY operation", params).fetchall()
        return [UsageTotals(str(r[0]), int(r[1]), int(r[2]), int(r[3]), float(r[4])) for r in rows]

    def spent_units(self, account_id: str, since: float) -> float:
        """Cost units the account spent since ``since``."""
        with self._store.database.reader(account_id) as db:
            row = db.run(
                "SELECT COALESCE(SUM(cost_units), 0) FROM llm_usage "
                "WHERE account_id = ? AND ts >= ?",
                [account_id, since],
            ).fetchone()
        return float(row[0])

    def swap_poll(self, account_id: str, caller: str, now: float) -> float | None:
        """Record ``now`` as the caller's last poll; the previous one (``None``: first)."""
        with self._store.database.transaction() as tx:
            tx.scope_to(account_id)
            row = tx.run(
                "SELECT polled_at FROM usage_polls WHERE account_id = ? AND caller = ?"
                + getattr(tx, "lock_suffix", ""),
                [account_id, caller],
            ).fetchone()
            tx.run(
                "INSERT INTO usage_polls (account_id, caller, polled_at) VALUES (?, ?, ?) "
                "ON CONFLICT (account_id, caller) DO UPDATE SET polled_at = excluded.polled_at",
                [account_id, caller, now],
            )
        return None if row is None else float(row[0])

    def defer(self, row: DeferredRow) -> None:
        """Keep a piece of background work until the budget allows it."""
        with self._store.database.transaction() as tx:
            tx.scope_to(row.account_id)
            tx.run(
                f"INSERT INTO deferred_work ({_DEFERRED_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    row.id,
                    row.account_id,
                    row.operation,
                    row.scope,
                    row.created_at,
                    row.key_id,
                    row.ciphertext,
                    row.wrapped_key,
                    row.source,
                ],
            )

    def deferred(self, account_id: str | None, limit: int) -> list[DeferredRow]:
        """Deferred work, oldest first (of one account, or of all)."""
        sql = f"SELECT {_DEFERRED_COLUMNS} FROM deferred_work"
        params: list[Any] = []
        if account_id is not None:
            sql += " WHERE account_id = ?"
            params.append(account_id)
        # The worker drains every account's deferred work; a caller naming one reads it alone.
        reader = (
            self._store.database.reader_across_accounts()
            if account_id is None
            else self._store.database.reader(account_id)
        )
        with reader as db:
            rows = db.run(sql + " ORDER BY created_at, id LIMIT ?", [*params, limit]).fetchall()
        return [
            DeferredRow(
                id=r[0],
                account_id=r[1],
                operation=r[2],
                scope=r[3],
                created_at=float(r[4]),
                key_id=r[5],
                ciphertext=bytes(r[6]),
                wrapped_key=bytes(r[7]),
                source=r[8],
            )
            for r in rows
        ]

    def drop_deferred(self, account_id: str, work_id: str) -> bool:
        """Delete a piece of the account's deferred work once done; False when another
        worker took it."""
        with self._store.database.transaction() as tx:
            tx.scope_to(account_id)
            cursor = tx.run(
                "DELETE FROM deferred_work WHERE id = ? AND account_id = ?", [work_id, account_id]
            )
        return int(cursor.rowcount) == 1


_DEFERRED_COLUMNS = (
    "id, account_id, operation, scope, created_at, key_id, ciphertext, wrapped_key, source"
)


def _apps(blob: str, real: str, serial: str) -> tuple[str, ...]:
    # ``apps`` holds each app's display name and cap override (never content). ``llm_usage``
    # is the ledger of LLM calls (operation, scope, tokens, cost units) and ``usage_polls``
    # each caller's last poll of it; ``deferred_work`` keeps background memory work held back
    # by the account's budget (its payload sealed by the caller). An app memory itself is a
    # memory naming its app (the memory store's ``app_id``).
    return (
        f"""CREATE TABLE IF NOT EXISTS apps (
            account_id TEXT NOT NULL, app_id TEXT NOT NULL, name TEXT,
            memory_cap INTEGER, created_at {real} NOT NULL, uninstalled_at {real},
            PRIMARY KEY (account_id, app_id))""",
        f"""CREATE TABLE IF NOT EXISTS llm_usage (
            id {serial}, account_id TEXT NOT NULL, operation TEXT NOT NULL, scope TEXT,
            prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
            calls INTEGER NOT NULL, cost_units {real} NOT NULL, ts {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS llm_usage_account ON llm_usage (account_id, ts)",
        f"""CREATE TABLE IF NOT EXISTS usage_polls (
            account_id TEXT NOT NULL, caller TEXT NOT NULL, polled_at {real} NOT NULL,
            PRIMARY KEY (account_id, caller))""",
        f"""CREATE TABLE IF NOT EXISTS deferred_work (
            id TEXT PRIMARY KEY, account_id TEXT NOT NULL, operation TEXT NOT NULL,
            scope TEXT NOT NULL, created_at {real} NOT NULL,
            key_id TEXT NOT NULL, ciphertext {blob} NOT NULL, wrapped_key {blob} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS deferred_work_account "
        "ON deferred_work (account_id, created_at)",
    )


APPS_FEATURE = Feature(
    name="apps",
    migrations=(
        Migration(
            version=1,
            name="app-memories",
            sqlite=_apps("BLOB", "REAL", "INTEGER PRIMARY KEY AUTOINCREMENT"),
            postgres=(
                *_apps(
                    "BYTEA", "DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
                ),
                *no_statistics("deferred_work"),
            ),
        ),
        Migration(
            version=2,
            name="row-level-security",
            sqlite=(),
            postgres=account_policies("apps", "llm_usage", "usage_polls", "deferred_work"),
        ),
    ),
)
"""App settings, the LLM usage ledger and its polls, and budget-deferred work."""
