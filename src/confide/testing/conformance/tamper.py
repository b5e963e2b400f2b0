"""Conformance: tampered rows and keys, and key-encryption keys that are wrong, old or half
rotated, give typed errors and never data.

What :mod:`~confide.testing.conformance.privacy` and ``blind_keys`` check one case each of,
here across positions, rows and users: flipped bytes anywhere in a sealed value, sealed
values and wrapped keys swapped between users, bound columns swapped between rows, a KEK
rotation interrupted halfway and run again, and a wrong key under the right KEK id.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.errors import KeyMismatchError, KeyUnavailableError, TamperedRowError
from confide.keys.rotation import rotate_kek
from confide.storage.base import Storage
from confide.storage.keystore import KeyStore
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import TEST_KEK, StorageHarness
from confide.types import Memory, MemoryFilter

NEW_KEK = bytes(range(200, 232))
USER_1 = MemoryFilter(account_id=ACCOUNT, user_id="user-1")
USER_2 = MemoryFilter(account_id=ACCOUNT, user_id="user-2")


def _set(storage: Storage, memory_id: str, **columns: Any) -> None:
    """Change columns of a stored row directly, as someone with the database would."""
    assignments = ", ".join(f"{name} = ?" for name in columns)
    with storage.database.transaction() as tx:
        tx.run(f"UPDATE memories SET {assignments} WHERE id = ?", [*columns.values(), memory_id])


def _flip(blob: bytes, position: int) -> bytes:
    flipped = bytearray(blob)
    flipped[position] ^= 0x80
    return bytes(flipped)


def _fresh(engine: MemoryEngine, ring: KeyRing, key_store: KeyStore) -> MemoryEngine:
    """Another process on the same stores, holding ``ring`` (nothing cached)."""
    return MemoryEngine(engine.storage, ring, settings=engine.settings, key_store=key_store)


def _values(engine: MemoryEngine, flt: MemoryFilter) -> set[str]:
    return {m.value for m in engine.list_memories(flt)}


class _KilledAfter:
    """A key store whose process is killed after ``rewraps`` re-wrapped keys."""

    def __init__(self, key_store: KeyStore, rewraps: int) -> None:
        self._key_store = key_store
        self._left = rewraps

    def __getattr__(self, name: str) -> Any:
        return getattr(self._key_store, name)

    def rewrap(self, row: Any, expected_kek_id: str) -> bool:
        if self._left == 0:
            raise SystemExit("killed")
        self._left -= 1
        return bool(self._key_store.rewrap(row, expected_kek_id=expected_kek_id))


class TamperConformance(StorageHarness):
    """Tampering and key faults: typed errors, nothing of the data returned."""

    @pytest.mark.parametrize("column", ["ciphertext", "wrapped_key"])
    def test_a_flipped_byte_anywhere_is_refused(
        self, engine: MemoryEngine, storage: Storage, column: str
    ) -> None:
        kept = add(engine, key="kept", value="still readable")
        victims: list[Memory] = []
        for index, position in enumerate((0, 12, 20, -17, -1)):  # nonce, body, tag
            memory = add(engine, key=f"v{index}", value=f"secret number {index}")
            row = storage.get_memory(ACCOUNT, memory.id)
            assert row is not None
            _set(storage, memory.id, **{column: _flip(getattr(row, column), position)})
            victims.append(memory)
        for memory in victims:
            with pytest.raises(TamperedRowError):
                engine.get(memory.id, account_id=ACCOUNT)
        assert _values(engine, USER_1) == {kept.value}
        assert engine.integrity_failures == 2 * len(victims)

    def test_sealed_values_swapped_between_users_open_for_neither(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        mine = add(engine, key="pin", value="my pin is 4711")
        theirs = add(engine, key="pin", value="their pin is 0815", user_id="user-2")
        rows = {m.id: storage.get_memory(ACCOUNT, m.id) for m in (mine, theirs)}
        for target, source in ((mine.id, theirs.id), (theirs.id, mine.id)):
            row = rows[source]
            assert row is not None
            _set(
                storage,
                target,
                ciphertext=row.ciphertext,
                wrapped_key=row.wrapped_key,
                key_id=row.key_id,
            )
        for memory in (mine, theirs):
            with pytest.raises(TamperedRowError):
                engine.get(memory.id, account_id=ACCOUNT)
        assert _values(engine, USER_1) == set() and _values(engine, USER_2) == set()

    @pytest.mark.parametrize(
        ("column", "first", "second"),
        [("category", "health", "family"), ("type", "fact", "preference")],
    )
    def test_bound_columns_swapped_between_rows_are_refused(
        self, engine: MemoryEngine, storage: Storage, column: str, first: str, second: str
    ) -> None:
        a = add(engine, key="a", value="first value", **{column: first})
        b = add(engine, key="b", value="second value", **{column: second})
        _set(storage, a.id, **{column: second})
        _set(storage, b.id, **{column: first})
        for memory in (a, b):
            with pytest.raises(TamperedRowError):
                engine.get(memory.id, account_id=ACCOUNT)
        assert _values(engine, USER_1) == set()

    def test_a_row_moved_to_another_account_opens_nowhere(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        add(engine, key="x", value="x", account_id="acct-2")  # the other account has keys
        memory = add(engine, value="belongs to the first account")
        _set(storage, memory.id, account_id="acct-2")
        with pytest.raises(TamperedRowError):
            engine.get(memory.id, account_id="acct-2")
        other = MemoryFilter(account_id="acct-2", user_id="user-1")
        assert _values(engine, other) == {"x"}

    def test_wrapped_keys_swapped_between_users_open_nothing(
        self, engine: MemoryEngine, key_store: KeyStore
    ) -> None:
        mine = add(engine, value="mine")
        theirs = add(engine, value="theirs", user_id="user-2")
        my_key = key_store.get(ACCOUNT, "user-1", "user")
        their_key = key_store.get(ACCOUNT, "user-2", "user")
        assert my_key is not None and their_key is not None
        key_store.destroy(ACCOUNT, "user-1", "user")
        key_store.add(replace(my_key, wrapped=their_key.wrapped))
        reader = _fresh(engine, engine.keyring, key_store)
        with pytest.raises(KeyMismatchError):
            reader.get(mine.id, account_id=ACCOUNT)
        with pytest.raises(KeyMismatchError):
            reader.list_memories(USER_1)
        assert reader.get(theirs.id, account_id=ACCOUNT).value == "theirs"
        assert reader.integrity_failures == 0  # the rows are not at fault

    def test_a_wrong_kek_under_the_right_id_is_a_key_error(
        self, engine: MemoryEngine, key_store: KeyStore
    ) -> None:
        memory = add(engine, value="under the real key")
        impostor = KeyRing(primary=NEW_KEK, former={engine.keyring.primary_id: NEW_KEK})
        reader = _fresh(engine, impostor, key_store)
        with pytest.raises(KeyMismatchError):
            reader.get(memory.id, account_id=ACCOUNT)
        with pytest.raises(KeyMismatchError):
            reader.list_memories(USER_1)
        assert reader.integrity_failures == 0

    def test_an_old_kek_after_rotation_is_unavailable_not_wrong(
        self, engine: MemoryEngine, key_store: KeyStore
    ) -> None:
        memory = add(engine, value="rotated")
        engine.rotate_kek(KeyRing(primary=NEW_KEK, former={engine.keyring.primary_id: TEST_KEK}))
        stale = _fresh(engine, KeyRing(primary=TEST_KEK), key_store)
        with pytest.raises(KeyUnavailableError):
            stale.get(memory.id, account_id=ACCOUNT)
        assert _fresh(engine, KeyRing(primary=NEW_KEK), key_store).get(
            memory.id, account_id=ACCOUNT
        ).value == ("rotated")

    def test_a_rotation_killed_halfway_then_run_again(
        self, engine: MemoryEngine, key_store: KeyStore
    ) -> None:
        memories = [add(engine, value=f"value of user {i}", user_id=f"user-{i}") for i in range(4)]
        total = len(key_store.rows())
        both = KeyRing(primary=NEW_KEK, former={engine.keyring.primary_id: TEST_KEK})
        with pytest.raises(SystemExit):
            rotate_kek(_KilledAfter(key_store, 2), engine.envelope, both)
        usage = key_store.kek_usage()
        assert usage == {both.primary_id: 2, engine.keyring.primary_id: total - 2}
        # Halfway, a process holding both KEKs reads everything; one holding only the old
        # KEK reads the keys not moved yet and gets a typed error for the others.
        halfway = _fresh(engine, both, key_store)
        assert [halfway.get(m.id, account_id=ACCOUNT).value for m in memories] == [
            m.value for m in memories
        ]
        old_only = _fresh(engine, KeyRing(primary=TEST_KEK), key_store)
        outcomes = []
        for memory in memories:
            try:
                outcomes.append(old_only.get(memory.id, account_id=ACCOUNT).value == memory.value)
            except KeyUnavailableError:
                outcomes.append(False)
        assert outcomes.count(True) == sum(
            1 for m in memories if key_store.get(ACCOUNT, m.user_id, "user") in _old(key_store)
        )
        # Run again: it finishes, and the new KEK alone reads everything.
        assert engine.rotate_kek(both) == total - 2
        assert key_store.kek_usage() == {both.primary_id: total}
        after = _fresh(engine, KeyRing(primary=NEW_KEK), key_store)
        assert [after.get(m.id, account_id=ACCOUNT).value for m in memories] == [
            m.value for m in memories
        ]
        with pytest.raises(KeyUnavailableError):
            _fresh(engine, KeyRing(primary=TEST_KEK), key_store).get(
                memories[0].id, account_id=ACCOUNT
            )


def _old(key_store: KeyStore) -> list[Any]:
    """The stored keys still wrapped under the test KEK."""
    old_id = KeyRing(primary=TEST_KEK).primary_id
    return [r for r in key_store.rows() if r.kek_id == old_id]
