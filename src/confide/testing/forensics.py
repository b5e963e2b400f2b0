"""What an attacker with a copy of the data files and the KEK could recover (for tests).

The probe reads files as raw bytes, the way a forensic carver would: it looks for known
byte strings (key ids, wrapped keys, ciphertexts) anywhere, including free pages, WAL
frames and dead tuples, and tries to unwrap a user key from every 60-byte window after each
occurrence of its key id (a wrapped user key is a 12-byte nonce, 32 key bytes and a 16-byte
tag, and the key id sits just before it in a key row).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confide.crypto.envelope import Envelope, WrappedUserKey
from confide.engine.residue import files_under
from confide.errors import IntegrityError
from confide.storage import open_storage
from confide.storage.base import MemoryRow
from confide.storage.keystore import open_key_store

__all__ = ["CarveReport", "carve", "files_under", "logical_dumps", "sentinels_in_clear"]

WRAPPED_KEY_BYTES = 60
WINDOW_SPAN = 2048


@dataclass
class CarveReport:
    """Where each sought byte string was found, and what could be decrypted."""

    files: int = 0
    found: dict[str, list[str]] = field(default_factory=dict)
    unwrapped_keys: int = 0
    decrypted_values: list[bytes] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Nothing found, nothing decrypted."""
        return not self.found and not self.unwrapped_keys and not self.decrypted_values

    def lines(self) -> list[str]:
        """A readable summary, one line per finding."""
        out = [f"files read: {self.files}"]
        out += [f"found {name} in {', '.join(places)}" for name, places in self.found.items()]
        out.append(f"user keys unwrapped by carving: {self.unwrapped_keys}")
        out.append(f"values decrypted: {len(self.decrypted_values)}")
        return out


def carve(
    files: Sequence[Path],
    *,
    envelope: Envelope,
    account_id: str,
    user_id: str,
    key_ids: Iterable[str],
    needles: dict[str, bytes],
    sealed: Sequence[MemoryRow] = (),
    open_value: Callable[[MemoryRow, bytes], object] | None = None,
) -> CarveReport:
    """Search ``files`` for ``needles`` and carve the user's keys after each key id.

    ``sealed`` holds the user's rows as they were before erasure; each carved user key is
    tried on all of them with ``open_value(row, user_key)`` (it raises
    :class:`IntegrityError` when the key does not open the row).
    """
    report = CarveReport(files=len(files))
    blobs = {path: blob for path in files if (blob := _read(path)) is not None}
    for name, needle in needles.items():
        places = [f"{p.name}@{b.find(needle)}" for p, b in blobs.items() if needle in b]
        if places:
            report.found[name] = places
    carved: list[bytes] = []
    for key_id in key_ids:
        marker = key_id.encode()
        for blob in blobs.values():
            start = blob.find(marker)
            while start >= 0:
                tail = blob[start + len(marker) : start + len(marker) + WINDOW_SPAN]
                for offset in range(0, max(0, len(tail) - WRAPPED_KEY_BYTES + 1)):
                    window = tail[offset : offset + WRAPPED_KEY_BYTES]
                    try:
                        raw = envelope.unwrap_user_key(
                            WrappedUserKey(key_id, window, envelope.keyring.primary_id),
                            account_id,
                            user_id,
                            "user",
                        )
                    except IntegrityError:
                        continue
                    carved.append(raw)
                start = blob.find(marker, start + 1)
    report.unwrapped_keys = len(carved)
    for raw in carved:
        for row in sealed:
            if open_value is None:
                break
            try:
                value = open_value(row, raw)
            except IntegrityError:
                continue
            report.decrypted_values.append(repr(value).encode())
    return report


def _read(path: Path) -> bytes | None:
    """The file's bytes, or ``None`` when the server removed it after it was listed (a
    running PostgreSQL rewrites files such as ``global/pg_internal.init`` at any time)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def logical_dumps(*urls: str) -> list[bytes]:
    """The ``pg_dump`` of each PostgreSQL database among ``urls`` (others are skipped).

    A dump holds every value as the database reads it back: a text the server compressed
    (TOAST) is not in clear in the files, but it is in a backup made with ``pg_dump``.
    """
    from confide.testing.postgres import pg_dump

    return [pg_dump(url) for url in urls if url.startswith(("postgresql:", "postgres:"))]


def sentinels_in_clear(
    storage_url: str, key_store_url: str, shape: re.Pattern[bytes], sent: Collection[str]
) -> int:
    """How many of the texts ``sent`` (values, messages, turns a run wrote) are readable in
    clear in the files of the store and the key store (SQLite: the database and its WAL;
    PostgreSQL: the database's relations, the server's WAL and a ``pg_dump`` of each).

    ``shape`` matches every text the run writes, so each file is read in one pass however
    many texts there are; the goal is 0, as everything is sealed before it is stored.
    """
    storage = open_storage(storage_url, pool_max=1)
    key_store = open_key_store(key_store_url)
    try:
        files = [*storage.data_files(), *key_store.data_files()]
    finally:
        key_store.close()
        storage.close()
    found: set[bytes] = set()
    for path in files:
        data = _read(path)
        if data is not None:
            found.update(shape.findall(data))
    for dump in logical_dumps(storage_url, key_store_url):
        found.update(shape.findall(dump))
    return len(found & {text.encode() for text in sent})
