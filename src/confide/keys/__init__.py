"""Owner keys over the key store: finding, creating and caching user and index keys, and
re-wrapping them all under a new key-encryption key (rotation).

Above :mod:`confide.storage` (keys live in a key store) and :mod:`confide.crypto` (which
stays pure: ciphers, envelopes and the key ring, no storage).
"""
