"""Key-encryption-key rotation: re-wrap every stored key, never re-encrypt a value."""

from __future__ import annotations

import logging
from collections.abc import Callable

from engram.crypto.envelope import Envelope, WrappedUserKey
from engram.crypto.keyring import KeyRing
from engram.storage.base import DataKeyRow, Storage

log = logging.getLogger(__name__)


def rotate_kek(
    storage: Storage,
    old: Envelope,
    new_ring: KeyRing,
    *,
    batch: int = 500,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Re-wrap every data key not yet under ``new_ring``'s primary KEK; return how many.

    Each key is re-wrapped in its own compare-and-set update, so an interrupted rotation
    leaves every key readable (under the old or the new KEK) and re-running finishes it.
    """
    new = Envelope(old.cipher, new_ring)
    target = new_ring.primary_id
    rewrapped = 0
    while True:
        rows = storage.data_keys(not_kek_id=target, limit=batch)
        if not rows:
            break
        with storage.transaction() as tx:
            for row in rows:
                raw = old.unwrap_user_key(
                    WrappedUserKey(row.key_id, row.wrapped, row.kek_id),
                    row.account_id,
                    row.user_id,
                    row.purpose,
                )
                wrapped = new.wrap_user_key(
                    raw, row.account_id, row.user_id, row.purpose, row.key_id
                )
                replacement = DataKeyRow(
                    row.account_id,
                    row.user_id,
                    row.purpose,
                    row.key_id,
                    wrapped.wrapped,
                    wrapped.kek_id,
                    row.created_at,
                )
                if tx.rewrap_data_key(replacement, expected_kek_id=row.kek_id):
                    rewrapped += 1
        if progress is not None:
            progress(rewrapped)
    log.info("re-wrapped %d keys under key-encryption key %s", rewrapped, target)
    return rewrapped
