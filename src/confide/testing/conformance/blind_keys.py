"""Memory keys are stored blinded, and the columns that decide who sees a row are bound to it.

A key such as ``dislikes_ex_husband_robert`` says as much as a value; it must not sit in clear
in any table, audit meta or database file. Changing a bound column (visibility, key, ...)
directly in the database must be detected, and one such row must not break a user's listing.
"""

from __future__ import annotations

from typing import Any

import pytest

from confide.engine import MemoryEngine
from confide.errors import TamperedRowError
from confide.storage.base import Capability, Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter, Visibility

SENSITIVE_KEYS = ("dislikes_ex_husband_robert", "likes_cocaine", "pain_lower_back")
# Pieces of those keys that must not appear anywhere either (e.g. in a lower-cased copy).
WORDS = ("ex_husband", "robert", "cocaine", "lower_back")

TABLES = ("memories", "history", "changes")


def raw_rows(storage: Storage, tables: tuple[str, ...] = TABLES) -> str:
    """Every row of ``tables`` as text, read directly from the database."""
    out = []
    with storage.database.transaction() as tx:
        for table in tables:
            for row in tx.run(f"SELECT * FROM {table}").fetchall():
                out.append(repr(tuple(row)))
    return "\n".join(out).lower()


def database_bytes(storage: Storage) -> bytes:
    """The database's own files, lower-cased (a server's WAL, shared by other tests' databases
    that write clear keys on purpose, is left out)."""
    files = storage.data_files(shared=False)
    return b"".join(p.read_bytes() for p in files if p.exists()).lower()


def assert_no_clear_keys(text: str | bytes, keys: tuple[str, ...] = SENSITIVE_KEYS) -> None:
    """Fail if ``text`` holds any of ``keys`` or the telling words of the sensitive keys."""
    for word in (*keys, *WORDS):
        needle: Any = word.encode() if isinstance(text, bytes) else word
        assert needle not in text, word


def tamper(storage: Storage, sql: str, params: list[Any]) -> None:
    """Change rows behind the engine's back, as someone with database access could."""
    with storage.database.transaction() as tx:
        tx.run(sql, params)


class BlindKeysConformance(StorageHarness):
    """Keys stored blinded; tampering with bound columns detected."""

    @pytest.mark.requires(Capability.DATA_FILES)
    def test_no_table_or_file_holds_a_clear_key(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        first = add(engine, key="dislikes_ex_husband_robert", value="he lied")
        second = engine.update(first.id, {"value": "he lied twice"}, account_id=ACCOUNT)
        engine.forget(second.id, account_id=ACCOUNT)
        engine.restore(second.id, account_id=ACCOUNT)
        engine.mark_shared(second.id, account_id=ACCOUNT)
        engine.update_by_key(
            account_id=ACCOUNT, user_id="user-1", key="Likes_Cocaine", value="on weekends"
        )
        add(engine, key="pain_lower_back", value="since May", user_id="user-2")

        assert_no_clear_keys(raw_rows(storage))
        dump = database_bytes(storage)
        assert len(dump) > 1000  # the dump really holds the rows
        assert_no_clear_keys(dump)
        # ...and every read still gives the clear key back.
        assert engine.get(second.id, account_id=ACCOUNT).key == "dislikes_ex_husband_robert"
        listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert {m.key for m in listed} == {"dislikes_ex_husband_robert", "Likes_Cocaine"}
        assert {e.meta["key"] for e in engine.history(second.id, account_id=ACCOUNT)} == {
            "dislikes_ex_husband_robert"
        }

    def test_lookups_by_key_stay_case_insensitive(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        stored = add(engine, key="Dog_Name", value="Rex")
        assert "dog_name" not in raw_rows(storage, ("memories",))
        found = engine.get_by_key(account_id=ACCOUNT, user_id="user-1", key="DOG_NAME")
        assert found is not None and found.id == stored.id and found.key == "Dog_Name"
        updated, action = engine.update_by_key(
            account_id=ACCOUNT, user_id="user-1", key="dog_name", value="Max"
        )
        assert action == "updated" and updated.lineage_id == stored.lineage_id
        assert updated.key == "Dog_Name"
        flt = MemoryFilter(account_id=ACCOUNT, user_id="user-1", keys=("dOG_nAME",))
        assert [m.value for m in engine.list_memories(flt)] == ["Max"]
        # Another account blinds the same key differently: no cross-account linkage.
        other = add(engine, key="dog_name", value="Fido", account_id="acct-2")
        assert engine.get(other.id, account_id="acct-2").key == "dog_name"
        with storage.database.transaction() as tx:
            stored_keys = {
                r[0]: r[1]
                for r in tx.run(
                    "SELECT account_id, key FROM memories WHERE state = 'active'"
                ).fetchall()
            }
        assert stored_keys[ACCOUNT] != stored_keys["acct-2"]

    def test_delta_header_still_shows_the_readable_key(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        memory = add(engine, key="dog_name", value="Rex", thread_id="t1")
        engine.update(memory.id, {"value": "Max"}, account_id=ACCOUNT, thread_id="t1")
        assert engine.delta_since("t1", 0, account_id=ACCOUNT, user_id="user-1") == (
            "Memory updates since rev 0:\n- +created: [Fact] Dog name is Max (imp=2)"
        )
        assert [c.meta["key"] for c in engine.changes_since("t1", 0)] == ["dog_name", "dog_name"]
        assert "dog_name" not in raw_rows(storage, ("changes", "history"))

    def test_visibility_flipped_in_the_database_is_not_shared(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        secret = add(engine, key="diagnosis", value="private matter")
        add(engine, key="motto", value="carpe diem", visibility=Visibility.SHARED)
        tamper(storage, "UPDATE memories SET visibility = 'shared' WHERE id = ?", [secret.id])
        other = MemoryFilter(account_id=ACCOUNT, user_id="user-2", include_shared=True)
        assert [m.value for m in engine.list_memories(other)] == ["carpe diem"]
        assert engine.integrity_failures == 1
        with pytest.raises(TamperedRowError):
            engine.get(secret.id, account_id=ACCOUNT)

    def test_a_visibility_change_through_the_engine_still_opens(self, engine: MemoryEngine) -> None:
        memory = add(engine, key="motto", value="carpe diem")
        engine.mark_shared(memory.id, account_id=ACCOUNT)
        other = MemoryFilter(account_id=ACCOUNT, user_id="user-2", include_shared=True)
        assert [m.value for m in engine.list_memories(other)] == ["carpe diem"]
        engine.mark_private(memory.id, account_id=ACCOUNT)
        assert engine.list_memories(other) == []
        assert engine.get(memory.id, account_id=ACCOUNT).visibility == Visibility.PRIVATE
        assert engine.integrity_failures == 0

    def test_keys_swapped_between_rows_are_detected(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        alpha = add(engine, key="alpha", value="first")
        beta = add(engine, key="beta", value="second")
        gamma = add(engine, key="gamma", value="third")
        with storage.database.transaction() as tx:
            keys = dict(
                tx.run(
                    "SELECT id, key FROM memories WHERE id IN (?, ?)", [alpha.id, beta.id]
                ).fetchall()
            )
            for mine, theirs in ((alpha.id, beta.id), (beta.id, alpha.id)):
                tx.run(
                    "UPDATE memories SET key = ?, key_lc = ? WHERE id = ?",
                    [keys[theirs], keys[theirs], mine],
                )
        # The row now filed under "alpha" is beta's: it must not answer for alpha.
        assert engine.get_by_key(account_id=ACCOUNT, user_id="user-1", key="alpha") is None
        assert engine.get_by_key(account_id=ACCOUNT, user_id="user-1", key="beta") is None
        listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
        assert [m.id for m in listed] == [gamma.id]
        assert engine.integrity_failures >= 3

    def test_one_tampered_row_leaves_the_rest_of_the_listing(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        kept = [add(engine, key=f"k{i}", value=f"value {i}") for i in range(3)]
        broken = add(engine, key="broken", value="will be damaged")
        for failures, (column, value) in enumerate(
            (("category", "health"), ("type", "preference"))
        ):
            tamper(storage, f"UPDATE memories SET {column} = ? WHERE id = ?", [value, broken.id])
            listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
            assert {m.id for m in listed} == {m.id for m in kept}, column
            assert engine.integrity_failures == failures + 1
            tamper(
                storage,
                f"UPDATE memories SET {column} = ? WHERE id = ?",
                [getattr(broken, column) if column == "category" else broken.type.value, broken.id],
            )
        assert engine.get(broken.id, account_id=ACCOUNT).value == "will be damaged"
        # Moving the row to another user is caught the same way.
        tamper(storage, "UPDATE memories SET user_id = 'user-2' WHERE id = ?", [broken.id])
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-2")) == []
        with pytest.raises(TamperedRowError):
            engine.get(broken.id, account_id=ACCOUNT)
