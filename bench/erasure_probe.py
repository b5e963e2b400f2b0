"""Erase a user, then carve the data files as an attacker with a copy of them and the KEK.

Stores sentinel memories (two versions each) for one user in a fresh SQLite store, erases
the user, and runs :func:`confide.testing.forensics.carve` over every file in the data
folder: each ciphertext, wrapped data key, key id and wrapped user key is searched for as
raw bytes, and every 60-byte window after each key-id occurrence is tried as the user's
wrapped key. Prints what was found and what decrypted (goal: nothing).

    python bench/erasure_probe.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES
from confide.storage.keystore import open_key_store
from confide.storage.sqlite import SqliteStorage
from confide.testing.builders import ACCOUNT, add
from confide.testing.forensics import carve, files_under

KEK = bytes(range(32))
SENTINELS = ("ultramarine-okapi-1", "ultramarine-okapi-2", "ultramarine-okapi-3")


def main() -> int:
    """Run the probe and print its report."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        storage = SqliteStorage(home / "confide.db", features=FEATURES)
        storage.migrate()
        keys = open_key_store(f"sqlite:///{home / 'keys.db'}")
        settings = Settings(home=home, encryption_key=KEK.hex())
        engine = MemoryEngine(storage, KeyRing(primary=KEK), settings=settings, key_store=keys)
        for index, value in enumerate(SENTINELS):
            memory = add(engine, key=f"k{index}", value=value)
            engine.update(memory.id, {"value": value + "-v2"}, account_id=ACCOUNT)
        rows = list(storage.iter_owner(ACCOUNT, "user-1"))
        key_row = keys.get(ACCOUNT, "user-1", "user")
        assert key_row is not None
        receipt = engine.erase_user(account_id=ACCOUNT, user_id="user-1")
        needles = {"key id": key_row.key_id.encode(), "wrapped user key": key_row.wrapped}
        for row in rows:
            needles[f"ciphertext of {row.id[:8]}"] = row.ciphertext
            needles[f"wrapped data key of {row.id[:8]}"] = row.wrapped_key
        files = [p for p in files_under(home) if not p.name.startswith("master.key")]
        report = carve(
            files,
            envelope=engine.envelope,
            account_id=ACCOUNT,
            user_id="user-1",
            key_ids=receipt.key_ids_destroyed,
            needles=needles,
            sealed=rows,
            open_value=lambda row, key: engine.codec.contents(row, key),
        )
        engine.close()
        print("files:", ", ".join(sorted(p.name for p in files)))
        print("\n".join(report.lines()))
        print("receipt scrubbed:", receipt.scrubbed)
        return 0 if report.clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
