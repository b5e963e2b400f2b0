"""The key-encryption keys (KEKs): from ``MEMORY_ENCRYPTION_KEY`` or the embedded key file."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from confide.config import Settings, parse_hex_key
from confide.crypto.aead import new_key
from confide.errors import ConfigurationError, KeyUnavailableError

log = logging.getLogger(__name__)

KEY_FILE_NAME = "master.key"
NEXT_KEY_FILE_NAME = "master.key.next"
FORMER_KEY_FILE_NAME = "master.key.old"
"""Every former KEK, one per line, appended by each rotation and removed only by
``confide keys retire`` once no stored key is wrapped under any of them."""


def kek_id(key: bytes) -> str:
    """A short public identifier of a KEK, derived from it (never reveals the key)."""
    return hashlib.sha256(b"confide-kek-id:" + key).hexdigest()[:16]


@dataclass
class KeyRing:
    """The primary KEK, which wraps new keys, and former KEKs that still unwrap older ones.

    A ring read from key files follows a rotation made by another process: :meth:`refresh`
    re-reads the files, and :meth:`get` does so by itself before giving up on an id.
    """

    primary: bytes
    former: dict[str, bytes] = field(default_factory=dict)
    key_file: Path | None = None

    @property
    def primary_id(self) -> str:
        """Identifier of the primary KEK."""
        return kek_id(self.primary)

    def get(self, key_id: str) -> bytes:
        """The KEK with this id; :class:`KeyUnavailableError` if no key file holds it."""
        found = self._find(key_id)
        if found is None and self.refresh():
            found = self._find(key_id)
        if found is None:
            raise KeyUnavailableError(f"key-encryption key {key_id} is not available")
        return found

    def _find(self, key_id: str) -> bytes | None:
        if key_id == self.primary_id:
            return self.primary
        return self.former.get(key_id)

    def refresh(self) -> bool:
        """Re-read the key files (after another process rotated); True if anything changed.

        Keys are only ever added to :attr:`former` here, never dropped: a key this process
        wrapped under an older KEK must stay readable until ``confide keys retire``.
        """
        if self.key_file is None or not self.key_file.exists():
            return False
        primary = _read_key_file(self.key_file)
        found = dict(_read_former(self.key_file.parent))
        pending = self.key_file.with_name(NEXT_KEY_FILE_NAME)
        if pending.exists():
            next_key = _read_key_file(pending)
            found[kek_id(next_key)] = next_key
        changed = primary != self.primary or any(k not in self.former for k in found)
        if primary != self.primary:
            found[self.primary_id] = self.primary
        self.former = {**self.former, **found}
        self.former.pop(kek_id(primary), None)
        self.primary = primary
        return changed

    def retire_former(self) -> list[str]:
        """Forget every former KEK and delete the file that holds them; their ids.

        Callers check first that no stored key is wrapped under any of them.
        """
        retired = sorted(self.former)
        self.former = {}
        if self.key_file is not None:
            former_file = self.key_file.with_name(FORMER_KEY_FILE_NAME)
            if former_file.exists():
                former_file.unlink()
        return retired


def _staged(path: Path, text: str) -> Path:
    """A new temporary file (mode 0600) beside ``path`` holding ``text``, on disk.

    Each writer stages its own: processes starting at once on one home must not share one.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(name)


def _write_key_file(path: Path, key: bytes, *, exclusive: bool = False) -> bytes:
    """Write ``key`` to ``path`` in one atomic step; the key the file holds afterwards.

    With ``exclusive`` the file is made only if none is there yet: a file another process
    made first wins and its key is returned, so every process started on an empty home
    ends up with the same key.
    """
    staged = _staged(path, key.hex() + "\n")
    try:
        if not exclusive:
            os.replace(staged, path)
            return key
        try:
            os.link(staged, path)  # fails if the name is taken: never replaces a key on file
        except FileExistsError:
            return _read_key_file(path)
        return key
    finally:
        staged.unlink(missing_ok=True)


def _read_key_file(path: Path) -> bytes:
    return parse_hex_key(path.read_text(), name=f"key file {path.name}")


def _read_former(home: Path) -> list[tuple[str, bytes]]:
    path = home / FORMER_KEY_FILE_NAME
    if not path.exists():
        return []
    keys = [
        parse_hex_key(line, name=f"key file {path.name}")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    return [(kek_id(key), key) for key in keys]


def _append_former(home: Path, key: bytes) -> None:
    known = [k for _, k in _read_former(home)]
    if key not in known:
        path = home / FORMER_KEY_FILE_NAME
        staged = _staged(path, "".join(k.hex() + "\n" for k in [*known, key]))
        try:
            os.replace(staged, path)
        finally:
            staged.unlink(missing_ok=True)


def load_keyring(settings: Settings, *, data_exists: bool = False) -> KeyRing:
    """Build the key ring from settings.

    ``MEMORY_ENCRYPTION_KEY`` wins when set. Otherwise the embedded default keeps a key file
    (mode 0600) in the data folder, creating it on first use and saying where. When
    ``data_exists`` (keys are stored) and no key is configured or on file, start-up stops
    with :class:`ConfigurationError`: a new KEK would make every stored value unreadable.
    """
    former = {}
    if settings.old_encryption_keys is not None:
        for part in settings.old_encryption_keys.get_secret_value().split(","):
            if part.strip():
                key = parse_hex_key(part, name="CONFIDE_OLD_ENCRYPTION_KEYS")
                former[kek_id(key)] = key
    if settings.encryption_key is not None:
        primary = parse_hex_key(
            settings.encryption_key.get_secret_value(), name="MEMORY_ENCRYPTION_KEY"
        )
        return KeyRing(primary=primary, former=former)
    path = settings.home / KEY_FILE_NAME
    if not path.exists() and data_exists:
        raise ConfigurationError(
            f"the key file {path} is missing, but keys wrapped by it are stored; restore it "
            "from its backup (or set MEMORY_ENCRYPTION_KEY). A new key would make every "
            "stored value unreadable, so none is created"
        )
    if not path.exists():
        made = new_key()
        if _write_key_file(path, made, exclusive=True) == made:
            log.warning("created a new key-encryption key file at %s (mode 0600); back it up", path)
    elif path.stat().st_mode & 0o077:
        raise ConfigurationError(f"key file {path} must not be readable by others (chmod 600)")
    primary = _read_key_file(path)
    former.update(_read_former(settings.home))
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
    # Two rotations started at once share the next key: the first written wins.
    return _write_key_file(next_path, new_key(), exclusive=True)


def finish_file_rotation(ring: KeyRing) -> None:
    """Make the next KEK the primary one; the former joins ``master.key.old``.

    ``master.key.old`` keeps every former KEK (a rotation appends, never overwrites), so a
    key that a still-running process wrapped under an older KEK stays readable until
    ``confide keys retire`` finds none in use.
    """
    if ring.key_file is None:
        return
    next_path = ring.key_file.with_name(NEXT_KEY_FILE_NAME)
    if next_path.exists():
        # Keep the former key beside it first; the swap itself is one atomic rename, so the
        # key file is never missing (a missing key file would make a brand-new key).
        _append_former(ring.key_file.parent, _read_key_file(ring.key_file))
        os.replace(next_path, ring.key_file)
