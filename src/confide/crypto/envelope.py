"""Envelope encryption of memory values.

KEK ──wraps──▶ user key (one per account/user, destroyed on erasure)
                 └─wraps──▶ data key (one per record) ──encrypts──▶ value

Every wrap and every value carries AAD binding it to its owner (and the record id), so a row
copied to another user or memory fails to decrypt instead of leaking. A value may also be bound
to more of its row (``binding``: the columns that decide who sees it), so changing one of those
columns in the database makes the value fail to open.

Memory keys are never stored in clear: :func:`blind_key` turns a key into a keyed hash under the
account's index key, which is what the database compares; the key itself is sealed with the value.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from confide.crypto.aead import Cipher, new_key
from confide.crypto.keyring import KeyRing

BLIND_KEY_PREFIX = "b:"
"""What starts every blinded memory key; a clear key never does (``:`` is not allowed in keys)."""


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


def _value_aad(account_id: str, user_id: str, record_id: str, binding: str | None) -> bytes:
    # Without a binding the AAD is exactly what values were sealed with before bindings
    # existed, so those values still open (until the store's upgrade re-seals them).
    if binding is None:
        return _aad("value", account_id, user_id, record_id)
    return _aad("value", account_id, user_id, record_id, "bound", binding)


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
        self,
        user_key: bytes,
        plaintext: bytes,
        account_id: str,
        user_id: str,
        record_id: str,
        *,
        binding: str | None = None,
    ) -> SealedValue:
        """Encrypt ``plaintext`` under a fresh data key bound to owner and record id.

        ``binding`` (any text, e.g. a JSON list of column values) is bound as well: the value
        then opens only with the same ``binding``.
        """
        aad = _value_aad(account_id, user_id, record_id, binding)
        data_key = new_key()
        return SealedValue(
            ciphertext=self._cipher.seal(data_key, plaintext, aad),
            wrapped_key=self._cipher.seal(user_key, data_key, aad),
        )

    def open(
        self,
        user_key: bytes,
        sealed: SealedValue,
        account_id: str,
        user_id: str,
        record_id: str,
        *,
        binding: str | None = None,
    ) -> bytes:
        """Decrypt a sealed value; :class:`IntegrityError` on any tampering or a moved row.

        ``binding`` must be the one the value was sealed with.
        """
        aad = _value_aad(account_id, user_id, record_id, binding)
        data_key = self._cipher.open(user_key, sealed.wrapped_key, aad)
        return self._cipher.open(data_key, sealed.ciphertext, aad)


_VECTOR_SEALING = b"confide-vector/1"


def vector_sealing_key(user_key: bytes) -> bytes:
    """The sub-key that seals a user's stored embeddings, derived from their user key.

    Vectors are sealed under it directly (no data key per vector: a user's whole index is
    opened at once, and one key schedule for all of it keeps that fast); destroying the
    user key makes them unreadable with everything else of the user.
    """
    return hmac.new(user_key, _VECTOR_SEALING, hashlib.sha256).digest()


def vector_aad(account_id: str, user_id: str, memory_id: str, model_id: str) -> bytes:
    """What a sealed vector is bound to: its owner, its memory version and its embedder."""
    return _aad("vector", account_id, user_id, memory_id, model_id)


def index_snapshot_aad(account_id: str, user_id: str) -> bytes:
    """What a sealed snapshot of a user's in-process vector index is bound to: its owner
    (a snapshot copied to another user's row does not open)."""
    return _aad("vector-index", account_id, user_id)


def blind_token(index_key: bytes, term: str) -> int:
    """A keyed hash of a search term as a signed 64-bit integer (no plaintext in the index)."""
    digest = hmac.new(index_key, term.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_KEY_BLINDING = b"confide-memory-key/1"


def key_blinding_key(index_key: bytes) -> bytes:
    """The sub-key that blinds memory keys, derived from an account's index key.

    Separate from the search tokens' key, so a memory key never hashes to the token of the same
    word in the lexical index.
    """
    return hmac.new(index_key, _KEY_BLINDING, hashlib.sha256).digest()


def blind_key(blinding_key: bytes, key: str) -> str:
    """The stored (blinded) form of a memory key: a keyed hash of the key, lower-cased.

    Case-insensitive like key lookups; 128 bits of HMAC-SHA256 as hex after
    :data:`BLIND_KEY_PREFIX`. ``blinding_key`` comes from :func:`key_blinding_key`.
    """
    digest = hmac.new(blinding_key, key.lower().encode(), hashlib.sha256).hexdigest()
    return BLIND_KEY_PREFIX + digest[:32]


_PSEUDONYMS = b"confide-pseudonym/1"
PSEUDONYM_PREFIX = "p:"


def pseudonym_key(index_key: bytes) -> bytes:
    """The sub-key that turns ids into pseudonyms, derived from an account's index key (apart
    from the memory keys' and the search tokens' keys)."""
    return hmac.new(index_key, _PSEUDONYMS, hashlib.sha256).digest()


def pseudonym(pseudonym_key: bytes, value: str) -> str:
    """A keyed pseudonym of an id (a user id, say): stored where a row must name the id
    without holding it in clear.

    Case-sensitive, unlike :func:`blind_key`: ids are. 128 bits of HMAC-SHA256 as hex after
    :data:`PSEUDONYM_PREFIX`; ``pseudonym_key`` comes from :func:`pseudonym_key`.
    """
    digest = hmac.new(pseudonym_key, value.encode(), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:32]


def is_blinded(stored_key: str) -> bool:
    """Whether a stored key is blinded (as opposed to a clear key of an older store)."""
    return stored_key.startswith(BLIND_KEY_PREFIX)
