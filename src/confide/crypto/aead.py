"""Authenticated encryption with associated data."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from confide.errors import IntegrityError

NONCE_BYTES = 12
KEY_BYTES = 32


class Cipher(Protocol):
    """An AEAD cipher: ``open`` raises :class:`IntegrityError` unless key, blob and AAD match."""

    def seal(self, key: bytes, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt and authenticate ``plaintext``; the result carries its nonce."""
        ...

    def open(self, key: bytes, blob: bytes, aad: bytes) -> bytes:
        """Decrypt ``blob`` made by :meth:`seal` with the same key and AAD."""
        ...

    def open_many(self, key: bytes, items: Sequence[tuple[bytes, bytes]]) -> list[bytes | None]:
        """Decrypt many ``(blob, aad)`` pairs under one key; ``None`` for each that does not
        open (a batch of rows is not lost to one tampered row)."""
        ...


class AesGcmCipher:
    """AES-256-GCM with a random 96-bit nonce prepended to the ciphertext."""

    def seal(self, key: bytes, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt and authenticate ``plaintext``; the result carries its nonce."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)

    def open(self, key: bytes, blob: bytes, aad: bytes) -> bytes:
        """Decrypt ``blob``; raise :class:`IntegrityError` if anything was tampered with."""
        if len(blob) < NONCE_BYTES + 16:
            raise IntegrityError("ciphertext is truncated")
        try:
            return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
        except InvalidTag:
            raise IntegrityError(
                "ciphertext failed authentication (tampered or wrong owner)"
            ) from None

    def open_many(self, key: bytes, items: Sequence[tuple[bytes, bytes]]) -> list[bytes | None]:
        """Decrypt many ``(blob, aad)`` pairs under one key (the key schedule is set up once,
        which is half the cost of opening a short blob)."""
        aead = AESGCM(key)
        out: list[bytes | None] = []
        for blob, aad in items:
            try:
                out.append(aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad))
            except (InvalidTag, ValueError):
                out.append(None)
        return out


def new_key() -> bytes:
    """A fresh random 256-bit key."""
    return os.urandom(KEY_BYTES)
