"""No memory text in clear anywhere in storage: the database's files, its WAL included."""

from __future__ import annotations

import pytest

from confide.engine import MemoryEngine
from confide.storage.base import Capability, Storage
from confide.testing.builders import ACCOUNT, add
from confide.testing.conformance.harness import StorageHarness

SENTINEL = "Xylophonist9274Marmalade"


def _write_everything(engine: MemoryEngine) -> None:
    first = add(engine, value=f"I keep a {SENTINEL} in the shed", tags=(SENTINEL,))
    second = engine.update(
        first.id,
        {"value": f"now the {SENTINEL} is gone", "metadata": {"n": SENTINEL}},
        account_id=ACCOUNT,
    )
    engine.forget(second.id, account_id=ACCOUNT)
    engine.restore(second.id, account_id=ACCOUNT)
    add(engine, key="note", value=SENTINEL.lower(), user_id="user-2")


def _storage_dump(storage: Storage, *, shared: bool = True) -> bytes:
    return b"".join(p.read_bytes() for p in storage.data_files(shared=shared) if p.exists())


class AtRestConformance(StorageHarness):
    """No memory text in clear in the store's files."""

    @pytest.mark.requires(Capability.DATA_FILES)
    def test_sentinel_never_reaches_storage_files(
        self, engine: MemoryEngine, storage: Storage
    ) -> None:
        _write_everything(engine)
        dump = _storage_dump(storage)
        assert len(dump) > 1000  # the dump really holds the rows
        assert SENTINEL.encode() not in dump
        assert SENTINEL.lower().encode() not in dump
        # A plain word of the value, in the database's own files (a server's WAL holds catalogue
        # words such as "flushed" of every database).
        assert b"shed" not in _storage_dump(storage, shared=False)
