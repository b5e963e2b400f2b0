"""Indexers: what gets written beside a memory version inside its write transaction.

An indexer does its slow work (tokenising, embedding) in :meth:`Indexer.prepare`, outside the
transaction, then writes its rows in :meth:`Indexer.write`, inside it, so a memory and its
index entries commit together or not at all.

A store records the tokenizer version its search terms were made with (``store_meta`` entry
:data:`TOKENIZER_META`); :func:`check_tokenizer_version` refuses a store made with another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confide.crypto.envelope import blind_token
from confide.errors import TokenizerMismatchError
from confide.index.memory_text import lexical_text
from confide.index.tokenize import TOKENIZER_VERSION, terms
from confide.keys.owner_keys import OwnerKeys
from confide.storage.base import AuditWrites, IndexWrites, Storage
from confide.types import Memory

TOKENIZER_META = "tokenizer_version"
"""The ``store_meta`` entry naming the :data:`TOKENIZER_VERSION` of the stored search terms."""

_UNRECORDED_VERSION = 1
"""The tokenizer every store written before versions were recorded used."""


class Indexer(Protocol):
    """Derives index rows from decrypted memories."""

    def prepare(self, memories: Sequence[Memory]) -> list[Any]:
        """Compute index data for each memory (outside any transaction)."""
        ...

    def write(self, tx: IndexWrites, memory: Memory, prepared: Any) -> None:
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

    def write(self, tx: IndexWrites, memory: Memory, prepared: Any) -> None:
        """Store the memory's blind tokens."""
        tx.put_tokens(memory.id, memory.account_id, memory.user_id, prepared)


def check_tokenizer_version(storage: Storage, *, has_data: bool) -> None:
    """Refuse a store whose search terms another tokenizer version made.

    A store without the entry gets one: the current version when it holds no data yet
    (``has_data`` false), else the version every store had before versions were recorded.

    Raises :class:`TokenizerMismatchError` (naming ``confide reindex``) on a mismatch.
    """
    recorded = storage.meta_value(TOKENIZER_META)
    if recorded is None:
        recorded = str(_UNRECORDED_VERSION if has_data else TOKENIZER_VERSION)
        with storage.transaction() as tx:
            tx.set_meta(TOKENIZER_META, recorded)
    if recorded != str(TOKENIZER_VERSION):
        raise TokenizerMismatchError(
            f"this store's search terms were made by tokenizer version {recorded}, not "
            f"{TOKENIZER_VERSION}; run 'confide reindex' to re-write them"
        )


def record_tokenizer_version(tx: AuditWrites) -> None:
    """Record that every stored search term comes from the current tokenizer."""
    tx.set_meta(TOKENIZER_META, str(TOKENIZER_VERSION))
