"""Conformance: erasure and purge leave nothing to carve, and hold across processes.

The carving tests read the database's and the key store's files as an attacker with a copy
of them and the KEK would: every key id, wrapped key and ciphertext of the erased values is
searched for as raw bytes, and every 60-byte window after each key id is tried as a wrapped
user key (see ``confide.testing.forensics``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from confide.chat.messages import MessageStore
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.engine.residue import markers_of, scan_files
from confide.errors import IntegrityError
from confide.storage.base import Capability, MemoryRow, Storage
from confide.storage.chat import MessageRow, SqlMessageTables
from confide.storage.keystore import KeyStore
from confide.storage.scrubs import SqlScrubTables
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness, other_process
from confide.testing.forensics import CarveReport, carve
from confide.types import MemoryFilter, ResidueMarkers

SENTINELS = ("ultramarine-okapi-1", "ultramarine-okapi-2", "ultramarine-okapi-3")
MESSAGE_SENTINELS = ("ultramarine-okapi-said-1", "ultramarine-okapi-said-2")


def _fill(engine: MemoryEngine) -> list[MemoryRow]:
    """Sentinel memories of user-1 with an older version each; their rows as stored."""
    for index, value in enumerate(SENTINELS):
        memory = add(engine, key=f"k{index}", value=value)
        engine.update(memory.id, {"value": value + "-v2"}, account_id=ACCOUNT)
    add(engine, key="bystander", value="someone else's", user_id="user-2")
    chat = MessageStore(engine)
    for text in MESSAGE_SENTINELS:
        chat.add(
            {
                "account_id": ACCOUNT,
                "user_id": "user-1",
                "conversation_id": "conv-erase",
                "role": "user",
                "content": text,
            }
        )
    return list(engine.storage.iter_owner(ACCOUNT, "user-1"))


def _messages(engine: MemoryEngine) -> list[MessageRow]:
    return SqlMessageTables(engine.storage).recent(ACCOUNT, "conv-erase", limit=10)


def _probe(
    engine: MemoryEngine,
    rows: list[MemoryRow],
    files: list[Path],
    key_ids: list[str],
    wrapped_user_keys: list[bytes],
    messages: Sequence[MessageRow] = (),
) -> CarveReport:
    needles: dict[str, bytes] = {}
    for message in messages:
        needles[f"message ciphertext {message.index}"] = message.ciphertext
        needles[f"message wrapped data key {message.index}"] = message.wrapped_key
    for row in rows:
        needles[f"ciphertext of {row.id[:8]}"] = row.ciphertext
        needles[f"wrapped data key of {row.id[:8]}"] = row.wrapped_key
    for key_id in key_ids:
        needles[f"key id {key_id[:8]}"] = key_id.encode()
    for index, wrapped in enumerate(wrapped_user_keys):
        needles[f"wrapped user key {index}"] = wrapped
    for value in (*SENTINELS, *MESSAGE_SENTINELS):
        needles[f"clear value {value}"] = value.encode()
    return carve(
        files,
        envelope=engine.envelope,
        account_id=ACCOUNT,
        user_id="user-1",
        key_ids=key_ids,
        needles=needles,
        sealed=rows,
        open_value=lambda row, key: engine.codec.contents(row, key),
    )


class ErasureConformance(StorageHarness):
    """Erasure and purge leave nothing to carve, and hold across processes."""

    @pytest.mark.requires(Capability.DATA_FILES)
    def test_erasure_leaves_nothing_to_carve(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        rows = _fill(engine)
        messages = _messages(engine)
        assert len(messages) == len(MESSAGE_SENTINELS)
        key_row = key_store.get(ACCOUNT, "user-1", "user")
        assert key_row is not None
        # Fold the logs into the data files first: a record in a log may straddle a log page
        # boundary, which a byte search cannot see through (scrubbing deletes nothing live).
        storage.scrub()
        key_store.scrub()
        files = storage.data_files() + key_store.data_files()
        # The probe finds what it looks for while the data is there (it can fail).
        before = _probe(engine, rows, files, [key_row.key_id], [key_row.wrapped], messages)
        assert before.unwrapped_keys >= 1 and len(set(before.decrypted_values)) == len(rows)
        assert any(name.startswith("message ciphertext") for name in before.found)

        receipt = engine.erase_user(account_id=ACCOUNT, user_id="user-1")

        files = storage.data_files() + key_store.data_files()
        after = _probe(engine, rows, files, receipt.key_ids_destroyed, [key_row.wrapped], messages)
        assert receipt.deleted["messages"] == len(MESSAGE_SENTINELS)
        assert after.clean, "\n".join(after.lines())
        assert engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-2"))

    @pytest.mark.requires(Capability.DATA_FILES)
    def test_erasure_verifies_itself_with_a_scan_of_the_files(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        rows = _fill(engine)
        storage.scrub()
        key_store.scrub()
        keys = key_store.owner_keys(ACCOUNT, "user-1", "user")
        sealed = [blob for row in rows for blob in (row.ciphertext, row.wrapped_key)]
        markers = markers_of([(k.key_id, k.wrapped) for k in keys], sealed)
        files = engine.residue_files()
        assert files is not None
        # The scan finds the markers while the rows are there (it can fail).
        assert scan_files(files, markers).occurrences >= len(markers.fragments)

        receipt = engine.erase_user(account_id=ACCOUNT, user_id="user-1")

        assert receipt.status == "verified", receipt.blocked_by
        assert receipt.scan is not None and receipt.scan.clean and receipt.scan.files_read
        assert set(markers.fragments) <= set(receipt.markers.fragments)
        assert receipt.markers.key_ids == [k.key_id for k in keys]
        assert scan_files(engine.residue_files() or [], receipt.markers).clean
        report = engine.scrub_report(receipt.id)
        assert report is not None and report.status == "verified" and report.kind == "erasure"
        assert SqlScrubTables(engine.storage.database).pending() == []

    @pytest.mark.requires(Capability.DATA_FILES)
    def test_rotation_and_retire_leave_no_key_wrapped_under_the_former_kek(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        _fill(engine)
        before = key_store.rows(limit=100)
        assert {r.user_id for r in before} >= {"user-1", "user-2"}
        tags = ResidueMarkers(fragments=[r.wrapped[-16:].hex() for r in before])
        storage.scrub()
        key_store.scrub()
        files = engine.residue_files()
        assert files is not None and scan_files(files, tags).occurrences >= len(before)

        former = engine.keyring
        engine.rotate_kek(
            KeyRing(primary=bytes(range(32, 64)), former={former.primary_id: former.primary})
        )
        assert engine.rotation_scrub is not None
        assert engine.rotation_scrub.status == "verified", engine.rotation_scrub.detail
        assert engine.retire_former_keks() == [former.primary_id]

        found = scan_files(engine.residue_files() or [], tags)
        assert found.clean, found.found
        listed = engine.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-2"))
        assert [m.value for m in listed] == ["someone else's"]

    @pytest.mark.requires(Capability.DATA_FILES)
    def test_purge_leaves_nothing_to_carve(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        rows = _fill(engine)
        for row in rows:
            if row.supersedes_id is not None:  # the newest version of each sentinel
                engine.forget(row.id, account_id=ACCOUNT)
        report = engine.purge_expired(now=time.time() + 31 * 86400)
        assert report.purged == 2 * len(SENTINELS) and report.scrubbed
        files = storage.data_files() + key_store.data_files()
        # The user's key lives on (the user was not erased); the purged values must not.
        key_row = key_store.get(ACCOUNT, "user-1", "user")
        assert key_row is not None
        needles = {}
        for row in rows:
            needles[f"ciphertext of {row.id[:8]}"] = row.ciphertext
            needles[f"wrapped data key of {row.id[:8]}"] = row.wrapped_key
        found = carve(
            files,
            envelope=engine.envelope,
            account_id=ACCOUNT,
            user_id="user-1",
            key_ids=[],
            needles=needles,
        )
        assert not found.found, "\n".join(found.lines())

    def test_a_copy_taken_before_erasure_stays_unreadable(
        self, engine: MemoryEngine, storage: Storage, key_store: KeyStore
    ) -> None:
        rows = _fill(engine)  # the copy: every row of user-1 as the data files held it
        engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        with storage.transaction() as tx:  # the copy restored into the live database
            for row in rows:
                tx.insert_memory(row)
        reader = MemoryEngine(
            storage,
            KeyRing(primary=engine.keyring.primary),
            settings=engine.settings,
            key_store=key_store,
        )
        for row in rows:
            with pytest.raises(IntegrityError):
                reader.get(row.id, account_id=ACCOUNT)

    def test_erasure_by_another_process_is_noticed_by_message_writers(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store_url: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """A chat message is never sealed under a key another process destroyed."""
        serving = MessageStore(engine)
        said = {"account_id": ACCOUNT, "user_id": "user-1", "conversation_id": "conv-1"}
        serving.add({**said, "role": "user", "content": "said before the erasure"})
        operator = other_process(storage_url, key_store_url, engine.settings, request)
        receipt = operator.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert receipt.deleted["messages"] == 1

        serving.add({**said, "role": "user", "content": "said after the erasure"})
        rows = SqlMessageTables(engine.storage).recent(ACCOUNT, "conv-1", limit=10)
        assert [r.key_id in receipt.key_ids_destroyed for r in rows] == [False]
        for reader in (serving, MessageStore(operator)):
            page = reader.page(account_id=ACCOUNT, user_id="user-1", conversation_id="conv-1")
            assert [m.content for m in page.messages] == ["said after the erasure"]

    def test_erasure_by_another_process_is_noticed_by_writers(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store_url: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """A serving process caches the user's key; another process erases the user."""
        serving = engine
        first = add(serving, key="before", value="written before the erasure")
        old_key = first  # the serving process now caches user-1's key
        operator = other_process(storage_url, key_store_url, serving.settings, request)
        receipt = operator.erase_user(account_id=ACCOUNT, user_id="user-1")
        assert receipt.key_ids_destroyed

        after = add(serving, key="after", value="written after the erasure")
        stored = storage.get_memory(ACCOUNT, after.id)
        assert stored is not None and stored.key_id not in receipt.key_ids_destroyed
        assert old_key.id != after.id
        # Every process reads the user's new memory; none answers with an error.
        for reader in (serving, operator):
            listed = reader.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
            assert [m.value for m in listed] == ["written after the erasure"]
        restarted = other_process(storage_url, key_store_url, serving.settings, request)
        assert restarted.get(after.id, account_id=ACCOUNT).value == "written after the erasure"

    def test_a_write_between_the_erasure_and_its_key_destruction_is_kept(
        self,
        engine: MemoryEngine,
        storage: Storage,
        storage_url: str,
        key_store_url: str,
        request: pytest.FixtureRequest,
    ) -> None:
        """A serving process writes for the user after the erasure's rows are deleted and
        before its keys are destroyed: the write seals under a key of the new generation,
        which the erasure keeps (destroying it would lose the write and leave its key id
        behind for the scan to find)."""
        serving = engine
        add(serving, key="before", value="written before the erasure")
        operator = other_process(storage_url, key_store_url, serving.settings, request)
        written: list[str] = []

        def write_when_rows_are_deleted(done: int, total: int | None) -> None:
            if done == 1:
                written.append(add(serving, key="during", value="written during it").id)

        receipt = operator.erase_user(
            account_id=ACCOUNT, user_id="user-1", progress=write_when_rows_are_deleted
        )

        assert len(written) == 1 and receipt.key_ids_destroyed
        stored = storage.get_memory(ACCOUNT, written[0])
        assert stored is not None and stored.key_id not in receipt.key_ids_destroyed
        assert receipt.status != "pending", receipt.blocked_by
        for reader in (serving, operator):
            listed = reader.list_memories(MemoryFilter(account_id=ACCOUNT, user_id="user-1"))
            assert [m.value for m in listed] == ["written during it"]
