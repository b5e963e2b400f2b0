"""The key-encryption keys (KEKs): from ``MEMORY_ENCRYPTION_KEY`` or the embedded key file."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from engram.config import Settings, parse_hex_key
from engram.crypto.aead import new_key
from engram.errors import ConfigurationError, IntegrityError

log = logging.getLogger(__name__)

KEY_FILE_NAME = "master.key"
NEXT_KEY_FILE_NAME = "master.key.next"


def kek_id(key: bytes) -> str:
    """A short public identifier of a KEK, derived from it (never reveals the key)."""
    return hashlib.sha256(b"engram-kek-id:" + key).hexdigest()[:16]


@dataclass
class KeyRing:
    """The primary KEK, which wraps new keys, and former KEKs still readable during a rotation."""

    primary: bytes
    former: dict[str, bytes] = field(default_factory=dict)
    key_file: Path | None = None

    @property
    def primary_id(self) -> str:
        """Identifier of the primary KEK."""
        return kek_id(self.primary)

    def get(self, key_id: str) -> bytes:
        """The KEK with this id; :class:`IntegrityError` if it is not in the ring."""
        if key_id == self.primary_id:
            return self.primary
        try:
            return self.former[key_id]
        except KeyError:
            raise IntegrityError(f"key-encryption key {key_id} is not available") from None


def _write_key_file(path: Path, key: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key.hex() + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _read_key_file(path: Path) -> bytes:
    return parse_hex_key(path.read_text(), name=f"key file {path.name}")


def load_keyring(settings: Settings) -> KeyRing:
    """Build the key ring from settings.

    ``MEMORY_ENCRYPTION_KEY`` wins when set. Otherwise the embedded default keeps a key file
    (mode 0600) in the data folder, creating it on first use and saying where.
    """
    former = {}
    if settings.old_encryption_keys is not None:
        for part in settings.old_encryption_keys.get_secret_value().split(","):
            if part.strip():
                key = parse_hex_key(part, name="ENGRAM_OLD_ENCRYPTION_KEYS")
                former[kek_id(key)] = key
    if settings.encryption_key is not None:
        primary = parse_hex_key(
            settings.encryption_key.get_secret_value(), name="MEMORY_ENCRYPTION_KEY"
        )
        return KeyRing(primary=primary, former=former)
    path = settings.home / KEY_FILE_NAME
    if not path.exists():
        _write_key_file(path, new_key())
        log.warning("created a new key-encryption key file at %s (mode 0600); back it up", path)
    elif path.stat().st_mode & 0o077:
        raise ConfigurationError(f"key file {path} must not be readable by others (chmod 600)")
    primary = _read_key_file(path)
    next_path = settings.home / NEXT_KEY_FILE_NAME
    if next_path.exists():
        # An interrupted rotation: both keys must stay readable until it is finished.
        pending = _read_key_file(next_path)
        former[kek_id(pending)] = pending
    return KeyRing(primary=primary, former=former, key_file=path)


def begin_file_rotation(ring: KeyRing) -> bytes:
    """Create (or reuse, after an interruption) the next KEK for a key-file rotation."""
    if ring.key_file is None:
        raise ConfigurationError("no key file: pass the new key explicitly")
    next_path = ring.key_file.with_name(NEXT_KEY_FILE_NAME)
    if next_path.exists():
        return _read_key_file(next_path)
    key = new_key()
    _write_key_file(next_path, key)
    return key


def finish_file_rotation(ring: KeyRing) -> None:
    """Make the next KEK the primary one, keeping the former key file as ``master.key.old``."""
    if ring.key_file is None:
        return
    next_path = ring.key_file.with_name(NEXT_KEY_FILE_NAME)
    if next_path.exists():
        # Keep the former key beside it first; the swap itself is one atomic rename, so the
        # key file is never missing (a missing key file would make a brand-new key).
        _write_key_file(ring.key_file.with_name(KEY_FILE_NAME + ".old"), ring.primary)
        os.replace(next_path, ring.key_file)
