"""The memory engine: store, update, forget, restore, list, history, export and erasure.

The engine depends only on protocols (``Storage``, ``KeyStore``, ``Indexer``) and the
envelope; it owns validation, versioning, encryption and the audit trail, so every backend
gets them alike. It is split by job: :mod:`.core` (writes and reads), :mod:`.lifecycle`
(purge, erasure, rotation, key upgrades), :mod:`.portability` (export and import),
:mod:`.delta` (the delta header) and :mod:`.ops` (operational events).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confide.config import Settings
from confide.crypto.keyring import KeyRing, load_keyring
from confide.engine.core import EngineCore, Link, default_thread
from confide.engine.delta import DELTA_SYMBOLS, EngineDeltas
from confide.engine.lifecycle import EngineLifecycle
from confide.engine.portability import EXPORT_FORMAT, EnginePortability
from confide.index.lexical import Indexer, check_tokenizer_version
from confide.storage import storage_from_settings
from confide.storage.base import KEYS_BLINDED, Storage
from confide.storage.keystore import KeyStore, open_key_store

__all__ = [
    "DELTA_SYMBOLS",
    "EXPORT_FORMAT",
    "EngineCore",
    "Link",
    "MemoryEngine",
    "default_thread",
]


class MemoryEngine(EngineLifecycle, EnginePortability, EngineDeltas):
    """Encrypted, versioned memory over any :class:`~confide.storage.base.Storage`.

    Every write is one transaction holding the memory row, its index entries, its history
    event and its change-log entry. Id-based operations act on the newest version of the
    memory the id belongs to, within the given account.

    Keys are stored blinded (a keyed hash per account) and sealed with the value; history and
    change-log rows carry the blinded form, and reads give the clear key back. A row changed
    outside Confide (see :class:`~confide.errors.TamperedRowError`) is left out of listings and
    searches and counted in :attr:`integrity_failures`; reading it by id raises.
    """

    def __init__(
        self,
        storage: Storage,
        keyring: KeyRing,
        *,
        settings: Settings | None = None,
        indexers: Sequence[Indexer] = (),
        key_store: KeyStore | None = None,
        reindexing: bool = False,
    ) -> None:
        super().__init__(
            storage, keyring, settings=settings, indexers=indexers, key_store=key_store
        )
        self._adopt_legacy_keys()
        if not reindexing:  # ``confide reindex`` opens a stale store to re-write its terms
            check_tokenizer_version(self.storage, has_data=self.key_store.has_keys())
        if self.storage.meta_value(KEYS_BLINDED) != "done":
            # A store written before keys were blinded: its rows open the old way until the
            # upgrade has re-sealed every one of them (and then never again).
            self.codec.legacy = True
            self.upgrade_keys()

    @classmethod
    def open(cls, settings: Settings | None = None, **kwargs: Any) -> MemoryEngine:
        """Open the configured storage (migrating it), key store and key ring.

        Raises :class:`~confide.errors.ConfigurationError` when keys are stored but the key
        file that wraps them is missing (a new one would make them unreadable), and
        :class:`~confide.errors.TokenizerMismatchError` when another tokenizer version made
        the store's search terms (``reindexing=True`` opens it anyway, to re-write them).
        """
        settings = settings or Settings()
        storage = storage_from_settings(settings)
        key_store = _open_key_store(settings)
        try:
            data_exists = key_store.has_keys() or bool(storage.legacy_data_keys())
            ring = load_keyring(settings, data_exists=data_exists)
            return cls(storage, ring, settings=settings, key_store=key_store, **kwargs)
        except BaseException:
            key_store.close()
            storage.close()
            raise


def _open_key_store(settings: Settings) -> KeyStore:
    url = settings.resolved_keystore_url()
    if url.startswith("postgres") and settings.keystore_url is None:
        from confide.storage.postgres import create_database_if_missing

        create_database_if_missing(url, via=settings.resolved_storage_url())
    return open_key_store(url)
