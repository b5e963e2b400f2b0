"""Conformance: KEK rotation seen by running processes, retiring old KEKs, a lost key file.

Each test opens engines the way the entry points do (``MemoryEngine.open`` with a key file
in the data folder and a key store apart from the data), on each backend.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from confide.config import Settings
from confide.crypto.envelope import Envelope
from confide.crypto.keyring import (
    FORMER_KEY_FILE_NAME,
    KEY_FILE_NAME,
    KeyRing,
    begin_file_rotation,
    finish_file_rotation,
    kek_id,
)
from confide.engine import MemoryEngine
from confide.errors import ConfigurationError, ConflictError
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness
from confide.types import MemoryFilter


def _open(settings: Settings, request: pytest.FixtureRequest) -> MemoryEngine:
    engine = MemoryEngine.open(settings)
    request.addfinalizer(engine.close)
    return engine


def _rotate(engine: MemoryEngine) -> bytes:
    """What ``confide keys rotate`` does with a key file; returns the new KEK."""
    ring = engine.keyring
    target = begin_file_rotation(ring)
    former = {ring.primary_id: ring.primary, **ring.former}
    engine.rotate_kek(KeyRing(primary=target, former=former, key_file=ring.key_file))
    finish_file_rotation(ring)
    return target


class KeyLifecycleConformance(StorageHarness):
    """KEK rotation seen by running processes, retiring old KEKs, a lost key file."""

    @pytest.fixture
    def opened(self, settings: Settings, storage_url: str, key_store_url: str) -> Settings:
        """Settings of a fresh store and key store, the KEK in a key file in the home."""
        return Settings(home=settings.home, storage_url=storage_url, keystore_url=key_store_url)

    def test_a_running_process_follows_a_rotation(
        self, opened: Settings, request: pytest.FixtureRequest
    ) -> None:
        operator = _open(opened, request)
        serving = _open(opened, request)
        old_kek = operator.keyring.primary
        cached = add(serving, key="cached", value="read before the rotation")
        untouched = add(operator, key="other", value="never read by the server", user_id="user-2")

        new_kek = _rotate(operator)

        # A user the serving process never cached: its key is now under the new KEK.
        assert serving.get(untouched.id, account_id=ACCOUNT).value == "never read by the server"
        assert serving.get(cached.id, account_id=ACCOUNT).value == "read before the rotation"
        # Keys the serving process creates from now on are wrapped under the new KEK.
        add(serving, key="new", value="a new user", user_id="user-3")
        created = serving.key_store.get(ACCOUNT, "user-3", "user")
        assert created is not None and created.kek_id == kek_id(new_kek)
        # The former KEK is kept, not overwritten, by the next rotation.
        _rotate(operator)
        former = (opened.home / FORMER_KEY_FILE_NAME).read_text().split()
        assert old_kek.hex() in former and new_kek.hex() in former

    def test_retiring_former_keks_waits_until_none_is_used(
        self, opened: Settings, request: pytest.FixtureRequest
    ) -> None:
        engine = _open(opened, request)
        add(engine, value="kept readable")
        old_ring = KeyRing(primary=engine.keyring.primary)
        _rotate(engine)
        # A key a process wrapped under the former KEK before it noticed the rotation.
        row = next(r for r in engine.key_store.rows() if r.purpose == "user")
        raw = engine.keys.by_id(row.account_id, row.user_id, row.key_id)
        stale = Envelope(engine.envelope.cipher, old_ring).wrap_user_key(
            raw, row.account_id, row.user_id, row.purpose, row.key_id
        )
        assert engine.key_store.rewrap(
            replace(row, wrapped=stale.wrapped, kek_id=stale.kek_id), expected_kek_id=row.kek_id
        )
        with pytest.raises(ConflictError, match=old_ring.primary_id):
            engine.retire_former_keks()
        assert (opened.home / FORMER_KEY_FILE_NAME).exists()

        assert engine.rotate_kek(engine.keyring) == 1  # re-running the rotation finishes it
        assert old_ring.primary_id in engine.retire_former_keks()
        assert not (opened.home / FORMER_KEY_FILE_NAME).exists()
        reopened = _open(opened, request)
        listed = reopened.list_memories(MemoryFilter(account_id=ACCOUNT))
        assert [m.value for m in listed] == ["kept readable"]

    def test_a_missing_key_file_beside_stored_keys_stops_start_up(
        self, opened: Settings, request: pytest.FixtureRequest
    ) -> None:
        engine = MemoryEngine.open(opened)
        add(engine)
        engine.close()
        (opened.home / KEY_FILE_NAME).unlink()
        with pytest.raises(ConfigurationError, match="missing"):
            _open(opened, request)
        assert not (opened.home / KEY_FILE_NAME).exists()
