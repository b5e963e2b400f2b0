"""Envelope encryption: AES-256-GCM values under per-record data keys, wrapped by per-user keys,
wrapped in turn by the key-encryption key (KEK)."""

from confide.crypto.aead import AesGcmCipher, Cipher
from confide.crypto.envelope import Envelope, SealedValue
from confide.crypto.keyring import KeyRing, kek_id, load_keyring

__all__ = ["AesGcmCipher", "Cipher", "Envelope", "KeyRing", "SealedValue", "kek_id", "load_keyring"]
