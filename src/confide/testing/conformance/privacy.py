"""Conformance: encryption at rest, tampering, erasure, export/import, key rotation."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from confide.crypto.envelope import Envelope, WrappedUserKey
from confide.crypto.keyring import KeyRing, kek_id
from confide.engine import MemoryEngine
from confide.errors import IntegrityError, NotFoundError, ValidationError
from confide.storage.base import Storage
from confide.storage.keystore import KeyStore
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter, MemoryState

NEW_KEK = bytes(range(100, 132))


def _raw(storage: Storage, memory_id: str) -> tuple[bytes, bytes]:
    row = storage.get_memory(ACCOUNT, memory_id)
    assert row is not None
    return row.ciphertext, row.wrapped_key


def _corrupt(blob: bytes) -> bytes:
    return blob[:-1] + bytes([blob[-1] ^ 0x01])


class PrivacyConformance(StorageHarness):
    """Encryption at rest, tampering, erasure, export and import, KEK rotation."""

    def test_value_is_not_stored_in_clear(self, engine: MemoryEngine, storage: Storage) -> None:
        memory = add(engine, value="the sentinel phrase zanzibar quokka")
        ciphertext, wrapped = _raw(storage, memory.id)
        assert b"zanzibar" not in ciphertext and b"zanzibar" not in wrapped

    @pytest.mark.parametrize("part", ["ciphertext", "wrapped_key"])
    def test_tampered_ciphertext_raises_integrity_error(
        self, engine: MemoryEngine, storage: Storage, part: str
    ) -> None:
        memory = add(engine)
        ciphertext, wrapped = _raw(storage, memory.id)
        blob = ciphertext if part == "ciphertext" else wrapped
        with storage.transaction() as tx:
            tx.update_memory(memory.id, {part: _corrupt(blob)})
        with pytest.raises(IntegrityError):
            engine.get(memory.id, account_id=ACCOUNT)

    def test_row_moved_to_another_memory_fails_to_decrypt(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        """The AAD binds a value to its owner and id: copying it elsewhere is detected."""
        victim = add(engine, value="secret of user one")
        target = add(engine, key="other", value="harmless")
        ciphertext, wrapped = _raw(storage, victim.id)
        with storage.transaction() as tx:
            tx.update_memory(target.id, {"ciphertext": ciphertext, "wrapped_key": wrapped})
        with pytest.raises(IntegrityError):
            engine.get(target.id, account_id=ACCOUNT)

    def test_row_moved_to_another_user_fails_to_decrypt(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        add(engine, key="x", value="x", user_id="user-2")  # user-2 gets a key of its own
        victim = add(engine, value="secret of user one")
        row = storage.get_memory(ACCOUNT, victim.id)
        assert row is not None
        moved = row._replace(id=str(uuid.uuid4()), user_id="user-2")
        with storage.transaction() as tx:
            tx.insert_memory(moved)
        with pytest.raises(IntegrityError):
            engine.get(moved.id, account_id=ACCOUNT)

    def test_tampered_user_key_raises_integrity_error(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        memory = add(engine)
        fresh = MemoryEngine(storage, engine.keyring, settings=engine.settings, key_store=key_store)
        row = key_store.get(ACCOUNT, "user-1", "user")
        assert row is not None
        key_store.destroy(ACCOUNT, "user-1", "user")
        key_store.add(replace(row, wrapped=_corrupt(row.wrapped)))
        with pytest.raises(IntegrityError):
            fresh.get(memory.id, account_id=ACCOUNT)

    def test_wrong_kek_cannot_read(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        memory = add(engine)
        stranger = MemoryEngine(
            storage, KeyRing(primary=NEW_KEK), settings=engine.settings, key_store=key_store
        )
        with pytest.raises(IntegrityError):
            stranger.get(memory.id, account_id=ACCOUNT)

    def test_erase_user_is_a_crypto_shred(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        memory = add(engine, value="erase me please")
        engine.update(memory.id, {"value": "erase me too"}, account_id=ACCOUNT)
        other = add(engine, key="keep", user_id="user-2")
        key_row = key_store.get(ACCOUNT, "user-1", "user")
        assert key_row is not None
        receipt = engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert receipt.key_id_destroyed == key_row.key_id
        assert receipt.key_ids_destroyed == [key_row.key_id]
        assert (
            receipt.key_store == key_store.location and "apart from the data" in receipt.key_store
        )
        assert set(receipt.scrubbed) == {"data", "keys"}
        assert receipt.deleted["memories"] == 2 and receipt.deleted["history"] == 2
        assert receipt.deleted["user_keys"] == 1 and receipt.deleted["memory_tokens"] > 0
        for table in ("memories", "history", "memory_tokens", "relations", "user_keys"):
            assert storage.count_rows(table, ACCOUNT, "user-1") == 0
        assert key_store.get(ACCOUNT, "user-1", "user") is None
        with pytest.raises(NotFoundError):
            engine.get(memory.id, account_id=ACCOUNT)
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1")) == []
        hashed = engine.lexical.hashed_terms(ACCOUNT, "erase")
        assert engine.get(other.id, account_id=ACCOUNT).state is MemoryState.ACTIVE
        assert hashed  # the token exists as a hash; no row of user-1 holds it any more

    def test_export_and_import_round_trip(self, engine: MemoryEngine) -> None:
        first = add(engine, value="v1", tags=("t",), metadata={"m": 1})
        engine.update(first.id, {"value": "v2"}, account_id=ACCOUNT)
        gone = add(engine, key="gone")
        engine.forget(gone.id, account_id=ACCOUNT)
        document = engine.export_user(account_id=ACCOUNT, user_id="user-1")
        assert [m["value"] for m in document["memories"]] == ["v1", "v2", "blue"]
        engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        report = engine.import_user(document)
        assert (report.imported, report.skipped) == (3, 0)
        again = engine.export_user(account_id=ACCOUNT, user_id="user-1")
        strip = [{k: v for k, v in m.items() if k != "last_accessed_at"} for m in again["memories"]]
        assert strip == [
            {k: v for k, v in m.items() if k != "last_accessed_at"} for m in document["memories"]
        ]
        assert engine.import_user(document).skipped == 3
        copied = engine.import_user(document, account_id="acct-9", user_id="someone")
        assert copied.imported == 3
        moved = engine.list_memories(MemoryFilter(account_id="acct-9", user_id="someone"))
        assert [m.value for m in moved] == ["v2"]
        again_copied = engine.import_user(document, account_id="acct-9", user_id="someone")
        assert (again_copied.imported, again_copied.skipped) == (0, 3)
        assert engine.list_memories(MemoryFilter(account_id="acct-9", user_id="someone")) == moved
        other = engine.import_user(document, account_id="acct-9", user_id="someone-else")
        assert other.imported == 3  # another owner gets its own copy

    def test_import_rejects_malformed_documents(self, engine: MemoryEngine) -> None:
        with pytest.raises(ValidationError):
            engine.import_user({"format": "other"})
        with pytest.raises(ValidationError):
            engine.import_user(
                {
                    "format": "confide.export/1",
                    "account_id": ACCOUNT,
                    "user_id": "u",
                    "memories": [{"id": "x"}],
                }
            )
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT)) == []

    def test_kek_rotation_rewraps_keys_and_is_rerunnable(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        memories = [add(engine, key=f"k{i}", user_id=f"user-{i}") for i in range(3)]
        before = {m.id: storage.get_memory(ACCOUNT, m.id) for m in memories}
        old_ring = engine.keyring
        new_ring = KeyRing(primary=NEW_KEK, former={old_ring.primary_id: old_ring.primary})
        # An interrupted rotation: only one key moved so far.
        partial = key_store.rows(limit=1)[0]
        env_old = Envelope(engine.envelope.cipher, old_ring)
        env_new = Envelope(engine.envelope.cipher, new_ring)
        raw = env_old.unwrap_user_key(
            WrappedUserKey(partial.key_id, partial.wrapped, partial.kek_id),
            partial.account_id,
            partial.user_id,
            partial.purpose,
        )
        wrapped = env_new.wrap_user_key(
            raw, partial.account_id, partial.user_id, partial.purpose, partial.key_id
        )
        assert key_store.rewrap(
            replace(partial, wrapped=wrapped.wrapped, kek_id=wrapped.kek_id),
            expected_kek_id=partial.kek_id,
        )
        total = len(key_store.rows())
        assert engine.rotate_kek(new_ring) == total - 1
        assert engine.rotate_kek(new_ring) == 0
        assert {k.kek_id for k in key_store.rows()} == {kek_id(NEW_KEK)}
        # Values were not re-encrypted, and only the new KEK is needed to read them.
        reader = MemoryEngine(
            storage, KeyRing(primary=NEW_KEK), settings=engine.settings, key_store=key_store
        )
        for m in memories:
            row, old = storage.get_memory(ACCOUNT, m.id), before[m.id]
            assert row is not None and old is not None
            assert row.ciphertext == old.ciphertext
            assert reader.get(m.id, account_id=ACCOUNT).value == "blue"

    def test_migrations_are_idempotent(self, storage: Storage) -> None:
        versions = storage.schema_versions()
        storage.migrate()
        storage.migrate()
        assert storage.schema_versions() == versions
        assert versions["memories"] >= 2
