"""Indexers: what gets written beside a memory version inside its write transaction.

An indexer does its slow work (tokenising, embedding) in :meth:`Indexer.prepare`, outside the
transaction, then writes its rows in :meth:`Indexer.write`, inside it, so a memory and its
index entries commit together or not at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from engram.crypto.envelope import blind_token
from engram.index.memory_text import lexical_text
from engram.index.tokenize import terms
from engram.keys.owner_keys import OwnerKeys
from engram.storage.base import Transaction
from engram.types import Memory


class Indexer(Protocol):
    """Derives index rows from decrypted memories."""

    def prepare(self, memories: Sequence[Memory]) -> list[Any]:
        """Compute index data for each memory (outside any transaction)."""
        ...

    def write(self, tx: Transaction, memory: Memory, prepared: Any) -> None:
        """Write one memory's prepared index data inside the write transaction."""
        ...


class LexicalIndexer:
    """Writes blind search tokens: keyed hashes of terms, never the terms themselves."""

    def __init__(self, keys: OwnerKeys, tokenize: Callable[[str], list[str]] = terms):
        self._keys = keys
        self._tokenize = tokenize

    def rebind(self, keys: OwnerKeys) -> None:
        """Use another key source (after a KEK rotation)."""
        self._keys = keys

    def hashed_terms(self, account_id: str, text: str) -> dict[int, int]:
        """Keyed-hash term frequencies of ``text`` for one account."""
        counts = Counter(self._tokenize(text))
        tokens = self.hash_terms(account_id, list(counts))
        return dict(zip(tokens, counts.values(), strict=True))

    def hash_terms(self, account_id: str, query_terms: Sequence[str]) -> list[int]:
        """Blind tokens of already tokenized terms (for queries)."""
        key = self._keys.index_key(account_id)
        return [blind_token(key, term) for term in query_terms]

    def prepare(self, memories: Sequence[Memory]) -> list[Any]:
        """Hash each memory's terms."""
        return [self.hashed_terms(m.account_id, lexical_text(m)) for m in memories]

    def write(self, tx: Transaction, memory: Memory, prepared: Any) -> None:
        """Store the memory's blind tokens."""
        tx.put_tokens(memory.id, memory.account_id, memory.user_id, prepared)
