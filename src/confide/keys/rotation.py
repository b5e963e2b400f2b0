"""Key-encryption-key rotation: re-wrap every stored key, never re-encrypt a value."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from confide.crypto.envelope import Envelope, WrappedUserKey
from confide.crypto.keyring import KeyRing
from confide.storage.keystore import PRIMARY_KEK, KeyStore

log = logging.getLogger(__name__)


def rotate_kek(
    key_store: KeyStore,
    old: Envelope,
    new_ring: KeyRing,
    *,
    batch: int = 500,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Re-wrap every key not yet under ``new_ring``'s primary KEK; return how many.

    The key store first names the new KEK, so every process wraps the keys it creates from
    then on under it (see ``OwnerKeys``). Each key is re-wrapped in its own compare-and-set
    update, so an interrupted rotation leaves every key readable (under the old or the new
    KEK) and re-running finishes it.
    """
    new = Envelope(old.cipher, new_ring)
    target = new_ring.primary_id
    key_store.set_meta(PRIMARY_KEK, target)
    rewrapped = 0
    skipped: set[tuple[str, str, str, str]] = set()
    while True:
        rows = [
            r
            for r in key_store.rows(not_kek_id=target, limit=batch + len(skipped))
            if (r.account_id, r.user_id, r.purpose, r.key_id) not in skipped
        ]
        if not rows:
            break
        for row in rows:
            raw = old.unwrap_user_key(
                WrappedUserKey(row.key_id, row.wrapped, row.kek_id),
                row.account_id,
                row.user_id,
                row.purpose,
            )
            wrapped = new.wrap_user_key(raw, row.account_id, row.user_id, row.purpose, row.key_id)
            replacement = replace(row, wrapped=wrapped.wrapped, kek_id=wrapped.kek_id)
            if key_store.rewrap(replacement, expected_kek_id=row.kek_id):
                rewrapped += 1
            else:  # destroyed or re-wrapped by another process meanwhile
                skipped.add((row.account_id, row.user_id, row.purpose, row.key_id))
        if progress is not None:
            progress(rewrapped)
    log.info("re-wrapped %d keys under key-encryption key %s", rewrapped, target)
    return rewrapped
