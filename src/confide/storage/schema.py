"""What a feature declares of its tables: their migrations and what erasure does with them.

The memory store and every feature that keeps tables in the database (chat messages, app
memories and the usage ledger, jobs, consolidation state, checkpoints, call sessions and
service tables, owed scrubs, derived-row provenance) describe them with one :class:`Feature`
beside their SQL. A backend is given the features it serves and applies each one's
migrations in order, recorded as ``(feature, version)``; erasing a user deletes the rows of
each feature's :attr:`Feature.owner_tables` and runs its :attr:`Feature.erase` hook. Adding a
table to a feature therefore touches that feature's module alone.

The DDL helpers below (:func:`account_policy`, :func:`no_statistics`) are the dialect facts
every feature's migrations share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from confide.storage.database import Statements

__all__ = [
    "SEALED_COLUMNS",
    "Derived",
    "EraseHook",
    "ErasingTransaction",
    "Feature",
    "Migration",
    "account_policies",
    "account_policy",
    "no_statistics",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One named schema step of a feature, with its statements for each dialect.

    Statements use ``IF NOT EXISTS`` so a half-recorded run can be repeated safely; SQLite
    lacks ``ADD COLUMN IF NOT EXISTS``, and its backend skips such a statement when the
    column exists.
    """

    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    def statements(self, dialect: str) -> tuple[str, ...]:
        """This step's statements in ``dialect`` (``sqlite`` or ``postgres``)."""
        return self.postgres if dialect == "postgres" else self.sqlite


@dataclass(frozen=True, slots=True)
class Derived:
    """What erasure needs of the engine to find a user's derived rows, which the store cannot
    work out: the pseudonyms their words are recorded under and the change-log threads named
    after them."""

    sources: tuple[str, ...] = ()
    threads: tuple[str, ...] = ()


class ErasingTransaction(Statements, Protocol):
    """The transaction that erases a user, as a feature's :attr:`Feature.erase` hook sees it."""

    def has_table(self, name: str) -> bool:
        """Whether a table exists (a feature whose migrations have not run has none)."""
        ...

    def delete_memories(self, memory_ids: Sequence[str]) -> int:
        """Hard-delete memory versions with their index rows; how many versions."""
        ...


EraseHook = Callable[[ErasingTransaction, str, str, Derived], Mapping[str, int]]
"""``erase(tx, account_id, user_id, derived)``: delete what the feature holds of the user
beyond their own rows; counts by what was removed."""


@dataclass(frozen=True, slots=True)
class Feature:
    """A feature's tables as the store needs to know them.

    ``migrations`` are numbered from 1 within the feature and applied in order after the
    memory store's own. ``owner_tables`` hold rows with ``account_id`` and ``user_id``
    columns that erasing that user deletes; ``sealed_tables`` are those of them whose rows
    carry a sealed value (``ciphertext`` and ``wrapped_key``), which an erasure's scan looks
    for afterwards. ``erase`` runs first in an erasure's transaction, while the user's own
    rows are still there to say what else is theirs.
    """

    name: str
    migrations: tuple[Migration, ...]
    owner_tables: tuple[str, ...] = ()
    sealed_tables: tuple[str, ...] = ()
    erase: EraseHook | None = None

    def __post_init__(self) -> None:
        versions = [m.version for m in self.migrations]
        if versions != list(range(1, len(versions) + 1)):
            raise ValueError(f"feature {self.name!r}: migrations must be numbered 1, 2, ...")
        if not set(self.sealed_tables) <= set(self.owner_tables):
            raise ValueError(f"feature {self.name!r}: a sealed table must be an owner table")


SEALED_COLUMNS = ("ciphertext", "wrapped_key", "key_id")
"""The columns of a row sealed under its owner's key."""


def no_statistics(table: str, columns: Sequence[str] = SEALED_COLUMNS) -> tuple[str, ...]:
    """PostgreSQL: collect no planner statistics on columns holding ciphertexts or keys.

    ``ANALYZE`` copies sample values into ``pg_statistic``, a catalog whose dead rows no
    erasure can reach; the planner never needs these columns' distributions.
    """
    return tuple(
        f"ALTER TABLE {table} ALTER COLUMN {column} SET STATISTICS 0" for column in columns
    )


def account_policy(table: str, *, rows_without_account: bool = False) -> tuple[str, ...]:
    """PostgreSQL: confine ``table`` to the account the transaction names.

    A row is visible (and may be written) only when its ``account_id`` equals the setting
    ``confide.account_id``, or when ``confide.all_accounts`` is ``on`` (the explicit bypass of
    maintenance across accounts). With neither set, nothing is visible. ``FORCE`` applies
    the policy to the table's owner too, which is the role the service connects as;
    superusers and roles with ``BYPASSRLS`` are never confined. ``rows_without_account``
    keeps rows of no account (``NULL``) visible: operational events and jobs across
    accounts (the hourly TTL), scrubs of a purge or a key rotation. Skipped (a ``DO`` block)
    while the table does not exist: ``embeddings`` appears with the first embedder and gets
    its policy then.
    """
    allowed = (
        "account_id = current_setting('confide.account_id', true) "
        "OR current_setting('confide.all_accounts', true) = 'on'"
    )
    if rows_without_account:
        allowed = f"account_id IS NULL OR {allowed}"
    return (
        f"""DO $$ BEGIN
        IF to_regclass('{table}') IS NOT NULL THEN
            ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
            ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
            DROP POLICY IF EXISTS confide_account ON {table};
            CREATE POLICY confide_account ON {table} USING ({allowed}) WITH CHECK ({allowed});
        END IF;
        END $$""",
    )


def account_policies(*tables: str) -> tuple[str, ...]:
    """:func:`account_policy` of each table (rows of no account stay hidden)."""
    return tuple(s for table in tables for s in account_policy(table))
