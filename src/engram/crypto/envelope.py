"""Envelope encryption of memory values.

KEK ──wraps──▶ user key (one per account/user, destroyed on erasure)
                 └─wraps──▶ data key (one per record) ──encrypts──▶ value

Every wrap and every value carries AAD binding it to its owner (and the record id), so a row
copied to another user or memory fails to decrypt instead of leaking.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from engram.crypto.aead import Cipher, new_key
from engram.crypto.keyring import KeyRing


@dataclass(frozen=True, slots=True)
class SealedValue:
    """A value encrypted under a fresh data key, itself wrapped by the owner's user key."""

    ciphertext: bytes
    wrapped_key: bytes


@dataclass(frozen=True, slots=True)
class WrappedUserKey:
    """A user key wrapped by a KEK, with the KEK's id."""

    key_id: str
    wrapped: bytes
    kek_id: str


def _aad(*parts: str) -> bytes:
    return "\x1f".join(parts).encode()


class Envelope:
    """Seals and opens values for one key ring; stateless apart from the ring."""

    def __init__(self, cipher: Cipher, keyring: KeyRing) -> None:
        self._cipher = cipher
        self.keyring = keyring

    @property
    def cipher(self) -> Cipher:
        """The AEAD cipher this envelope uses."""
        return self._cipher

    # ---- user keys -------------------------------------------------------------------------
    def new_user_key(
        self, account_id: str, user_id: str, purpose: str, key_id: str
    ) -> tuple[bytes, WrappedUserKey]:
        """Create a user key and wrap it under the primary KEK."""
        raw = new_key()
        return raw, self.wrap_user_key(raw, account_id, user_id, purpose, key_id)

    def wrap_user_key(
        self,
        raw: bytes,
        account_id: str,
        user_id: str,
        purpose: str,
        key_id: str,
        *,
        kek_id: str | None = None,
    ) -> WrappedUserKey:
        """Wrap ``raw`` under the KEK ``kek_id`` (the primary KEK by default)."""
        kid = kek_id or self.keyring.primary_id
        blob = self._cipher.seal(
            self.keyring.get(kid), raw, _aad("user-key", account_id, user_id, purpose, key_id)
        )
        return WrappedUserKey(key_id=key_id, wrapped=blob, kek_id=kid)

    def unwrap_user_key(
        self, wrapped: WrappedUserKey, account_id: str, user_id: str, purpose: str
    ) -> bytes:
        """Unwrap a user key; :class:`IntegrityError` if it was tampered with or moved."""
        kek = self.keyring.get(wrapped.kek_id)
        return self._cipher.open(
            kek, wrapped.wrapped, _aad("user-key", account_id, user_id, purpose, wrapped.key_id)
        )

    # ---- values ----------------------------------------------------------------------------
    def seal(
        self, user_key: bytes, plaintext: bytes, account_id: str, user_id: str, record_id: str
    ) -> SealedValue:
        """Encrypt ``plaintext`` under a fresh data key bound to owner and record id."""
        aad = _aad("value", account_id, user_id, record_id)
        data_key = new_key()
        return SealedValue(
            ciphertext=self._cipher.seal(data_key, plaintext, aad),
            wrapped_key=self._cipher.seal(user_key, data_key, aad),
        )

    def open(
        self, user_key: bytes, sealed: SealedValue, account_id: str, user_id: str, record_id: str
    ) -> bytes:
        """Decrypt a sealed value; :class:`IntegrityError` on any tampering or a moved row."""
        aad = _aad("value", account_id, user_id, record_id)
        data_key = self._cipher.open(user_key, sealed.wrapped_key, aad)
        return self._cipher.open(data_key, sealed.ciphertext, aad)


def blind_token(index_key: bytes, term: str) -> int:
    """A keyed hash of a search term as a signed 64-bit integer (no plaintext in the index)."""
    digest = hmac.new(index_key, term.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
