"""Per-owner keys: created on first use, unwrapped once and cached in process memory."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict

from engram.crypto.envelope import Envelope, WrappedUserKey, blind_key, key_blinding_key
from engram.errors import IntegrityError
from engram.storage.base import DataKeyRow, Storage

USER_KEY = "user"
INDEX_KEY = "index"
ACCOUNT_WIDE = ""


class OwnerKeys:
    """Finds, creates and caches the keys of one storage's owners.

    ``user`` keys encrypt a user's memories (destroying one crypto-shreds the user);
    the account's ``index`` key blinds search tokens so shared memories stay searchable.
    """

    def __init__(self, storage: Storage, envelope: Envelope, *, cache_size: int = 4096) -> None:
        self._storage = storage
        self._envelope = envelope
        self._cache: OrderedDict[tuple[str, str, str], tuple[str, bytes]] = OrderedDict()
        self._blinding: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = cache_size

    def user_key(self, account_id: str, user_id: str, *, create: bool = True) -> tuple[str, bytes]:
        """``(key_id, raw key)`` of a user; created when missing and ``create`` is set."""
        return self._get(account_id, user_id, USER_KEY, create=create)

    def index_key(self, account_id: str) -> bytes:
        """The account's key for blind search tokens."""
        return self._get(account_id, ACCOUNT_WIDE, INDEX_KEY, create=True)[1]

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

    def forget(self, account_id: str, user_id: str) -> None:
        """Drop a user's key from the cache (after erasure)."""
        with self._lock:
            self._cache.pop((account_id, user_id, USER_KEY), None)

    def clear(self) -> None:
        """Drop every cached key (after a rotation)."""
        with self._lock:
            self._cache.clear()
            self._blinding.clear()

    def _get(
        self, account_id: str, user_id: str, purpose: str, *, create: bool
    ) -> tuple[str, bytes]:
        cache_key = (account_id, user_id, purpose)
        with self._lock:
            hit = self._cache.get(cache_key)
            if hit is not None:
                self._cache.move_to_end(cache_key)
                return hit
        row = self._storage.get_data_key(account_id, user_id, purpose)
        if row is None:
            if not create:
                raise IntegrityError("no key exists for this owner (erased or never written)")
            row = self._create(account_id, user_id, purpose)
        raw = self._envelope.unwrap_user_key(
            WrappedUserKey(row.key_id, row.wrapped, row.kek_id), account_id, user_id, purpose
        )
        entry = (row.key_id, raw)
        with self._lock:
            self._cache[cache_key] = entry
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return entry

    def _create(self, account_id: str, user_id: str, purpose: str) -> DataKeyRow:
        key_id = uuid.uuid4().hex
        _, wrapped = self._envelope.new_user_key(account_id, user_id, purpose, key_id)
        row = DataKeyRow(
            account_id, user_id, purpose, key_id, wrapped.wrapped, wrapped.kek_id, time.time()
        )
        with self._storage.transaction() as tx:
            tx.insert_data_key(row)
        # Another writer may have won the race; whatever is stored now is the key.
        stored = self._storage.get_data_key(account_id, user_id, purpose)
        if stored is None:  # pragma: no cover - erased between the two statements
            raise IntegrityError("owner key vanished while being created")
        return stored
