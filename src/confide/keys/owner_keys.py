"""Per-owner keys: created on first use, unwrapped once and cached in process memory.

The wrapped keys live in a :class:`~confide.storage.keystore.KeyStore`, apart from the data.
A user's key has a generation (see the key store's docstring): writes use the current
generation's key, reads the key whose id the row names.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from confide.crypto.aead import new_key
from confide.crypto.envelope import (
    Envelope,
    WrappedUserKey,
    blind_key,
    key_blinding_key,
    pseudonym,
    pseudonym_key,
)
from confide.errors import IntegrityError, KeyMismatchError, KeyUnavailableError
from confide.storage.base import DataKeyRow, Storage
from confide.storage.keystore import PRIMARY_KEK, KeyStore

USER_KEY = "user"
INDEX_KEY = "index"
ACCOUNT_WIDE = ""


@dataclass(frozen=True, slots=True)
class OwnerKey:
    """An unwrapped key with its id and generation."""

    key_id: str
    raw: bytes
    generation: int


class OwnerKeys:
    """Finds, creates and caches the keys of one storage's owners.

    ``user`` keys encrypt a user's memories (destroying them crypto-shreds the user); the
    account's ``index`` key blinds search tokens so shared memories stay searchable.
    """

    def __init__(
        self,
        storage: Storage,
        key_store: KeyStore,
        envelope: Envelope,
        *,
        cache_size: int = 4096,
    ) -> None:
        self._storage = storage
        self._key_store = key_store
        self._envelope = envelope
        self._current: OrderedDict[tuple[str, str, str], OwnerKey] = OrderedDict()
        self._by_id: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()
        self._blinding: OrderedDict[str, bytes] = OrderedDict()
        self._pseudonyms: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = cache_size

    def current(self, account_id: str, user_id: str) -> OwnerKey:
        """The key new data of a user is sealed under (created on first use).

        Its generation must still be current when the write commits; the engine checks it
        inside the write transaction (see ``Transaction.key_generation``).
        """
        cache_key = (account_id, user_id, USER_KEY)
        with self._lock:
            hit = self._current.get(cache_key)
            if hit is not None:
                self._current.move_to_end(cache_key)
                return hit
        generation = self._storage.key_generation(account_id, user_id)
        entry = self._load(account_id, user_id, USER_KEY, generation)
        self._remember(cache_key, entry)
        return entry

    def user_key(self, account_id: str, user_id: str, *, create: bool = True) -> tuple[str, bytes]:
        """``(key_id, raw key)`` of a user's current key; created when missing and ``create``."""
        if not create:
            row = self._key_store.get(account_id, user_id, USER_KEY)
            if row is None:
                raise IntegrityError("no key exists for this owner (erased or never written)")
            return row.key_id, self.by_id(account_id, user_id, row.key_id)
        entry = self.current(account_id, user_id)
        return entry.key_id, entry.raw

    def by_id(self, account_id: str, user_id: str, key_id: str) -> bytes:
        """The user key with this id (the one a stored row names).

        Raises :class:`IntegrityError` when no such key exists: it was destroyed by an
        erasure, or the row was forged.
        """
        cache_key = (account_id, user_id, key_id)
        with self._lock:
            hit = self._by_id.get(cache_key)
            if hit is not None:
                self._by_id.move_to_end(cache_key)
                return hit
            current = self._current.get((account_id, user_id, USER_KEY))
        if current is not None and current.key_id == key_id:
            return current.raw
        row = self._key_store.get(account_id, user_id, USER_KEY, key_id=key_id)
        if row is None:
            raise IntegrityError("the key of this row does not exist (erased or forged)")
        raw = self._unwrap(row)
        with self._lock:
            self._by_id[cache_key] = raw
            if len(self._by_id) > self._cache_size:
                self._by_id.popitem(last=False)
        return raw

    def index_key(self, account_id: str) -> bytes:
        """The account's key for blind search tokens."""
        cache_key = (account_id, ACCOUNT_WIDE, INDEX_KEY)
        with self._lock:
            hit = self._current.get(cache_key)
            if hit is not None:
                return hit.raw
        entry = self._load(account_id, ACCOUNT_WIDE, INDEX_KEY, 0)
        self._remember(cache_key, entry)
        return entry.raw

    def blind_key(self, account_id: str, key: str) -> str:
        """The blinded form of a memory key in this account (what the database stores)."""
        with self._lock:
            sub = self._blinding.get(account_id)
        if sub is None:
            sub = key_blinding_key(self.index_key(account_id))
            with self._lock:
                self._blinding[account_id] = sub
                if len(self._blinding) > self._cache_size:
                    self._blinding.popitem(last=False)
        return blind_key(sub, key)

    def pseudonym(self, account_id: str, value: str) -> str:
        """The keyed pseudonym of an id in this account (see
        :func:`confide.crypto.envelope.pseudonym`)."""
        with self._lock:
            sub = self._pseudonyms.get(account_id)
        if sub is None:
            sub = pseudonym_key(self.index_key(account_id))
            with self._lock:
                self._pseudonyms[account_id] = sub
                if len(self._pseudonyms) > self._cache_size:
                    self._pseudonyms.popitem(last=False)
        return pseudonym(sub, value)

    def forget(self, account_id: str, user_id: str) -> None:
        """Drop a user's keys from the cache (after erasure, or a stale generation)."""
        with self._lock:
            self._current.pop((account_id, user_id, USER_KEY), None)
            for cached in [k for k in self._by_id if k[:2] == (account_id, user_id)]:
                del self._by_id[cached]

    def clear(self) -> None:
        """Drop every cached key (after a rotation)."""
        with self._lock:
            self._current.clear()
            self._by_id.clear()
            self._blinding.clear()
            self._pseudonyms.clear()

    def _remember(self, cache_key: tuple[str, str, str], entry: OwnerKey) -> None:
        with self._lock:
            self._current[cache_key] = entry
            if len(self._current) > self._cache_size:
                self._current.popitem(last=False)

    def _load(self, account_id: str, user_id: str, purpose: str, generation: int) -> OwnerKey:
        row = self._key_store.get(account_id, user_id, purpose, generation=generation)
        if row is None:
            row = self._create(account_id, user_id, purpose, generation)
        return OwnerKey(row.key_id, self._unwrap(row), row.generation)

    def _unwrap(self, row: DataKeyRow) -> bytes:
        """The raw key of a stored row; :class:`KeyMismatchError` when it does not open
        under the KEK it names (a wrong KEK given under that name, or a tampered key row)."""
        try:
            return self._envelope.unwrap_user_key(
                WrappedUserKey(row.key_id, row.wrapped, row.kek_id),
                row.account_id,
                row.user_id,
                row.purpose,
            )
        except KeyUnavailableError:
            raise
        except IntegrityError:
            raise KeyMismatchError(
                f"stored key {row.key_id} does not open under key-encryption key {row.kek_id}: "
                "this process was given a different key under that id, or the key store "
                "was changed"
            ) from None

    def _create(self, account_id: str, user_id: str, purpose: str, generation: int) -> DataKeyRow:
        key_id = uuid.uuid4().hex
        raw = new_key()
        wrapped = self._envelope.wrap_user_key(
            raw, account_id, user_id, purpose, key_id, kek_id=self._wrapping_kek()
        )
        row = DataKeyRow(
            account_id,
            user_id,
            purpose,
            key_id,
            wrapped.wrapped,
            wrapped.kek_id,
            time.time(),
            generation,
        )
        # Another writer may have won the race; whatever is stored now is the key.
        return self._key_store.add(row)

    def _wrapping_kek(self) -> str:
        """The KEK new keys are wrapped under: the one the key store names, once rotated.

        A process started before a rotation would otherwise wrap new keys under the KEK the
        rotation is retiring; the ring re-reads its key files to find the new one.
        """
        ring = self._envelope.keyring
        named = self._key_store.meta(PRIMARY_KEK)
        if named is None or named == ring.primary_id:
            return ring.primary_id
        try:
            ring.get(named)
        except KeyUnavailableError:
            raise KeyUnavailableError(
                f"keys are now wrapped under key-encryption key {named}, which this process "
                "does not hold; give it the new key (MEMORY_ENCRYPTION_KEY) and restart"
            ) from None
        return named
