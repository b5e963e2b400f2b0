"""What retrieval needs from the engine, as one small protocol.

Retrieval searches the store's index with the caller's filter and opens only the rows it
ranks; it never sees the engine's keys, codec or storage. :class:`MemoryEngine` implements
:class:`MemoryReader`; a test can hand retrieval anything else that does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from confide.index.codec import Contents
from confide.storage.base import MemoryRow, SearchIndex
from confide.types import Memory, MemoryFilter

__all__ = ["DeltaFeed", "MemoryReader"]


class MemoryReader(Protocol):
    """Filtered searches over the store, and the opening of the rows they return."""

    @property
    def search_index(self) -> SearchIndex:
        """Filtered vector, lexical and edge reads (scores and sealed rows only)."""
        ...

    def rows_in_filter(self, flt: MemoryFilter, memory_ids: Sequence[str]) -> list[MemoryRow]:
        """The sealed rows among ``memory_ids`` that match ``flt``."""
        ...

    def has_others_shared(self, flt: MemoryFilter) -> bool:
        """Whether ``flt``'s shared half reaches any memory of another user."""
        ...

    def try_open_contents(self, row: MemoryRow) -> Contents | None:
        """A row's decrypted contents, or ``None`` (counted) when it fails authentication."""
        ...

    def memory_of(self, row: MemoryRow, contents: Contents) -> Memory:
        """The :class:`Memory` of a row and its opened contents."""
        ...

    def blind_terms(self, account_id: str, query_terms: Sequence[str]) -> list[int]:
        """The account's blind lexical tokens of ``query_terms``."""
        ...

    def list_memories(
        self, flt: MemoryFilter, *, limit: int = 100, offset: int = 0
    ) -> list[Memory]:
        """Memories matching ``flt``, newest first."""
        ...


class DeltaFeed(Protocol):
    """The delta header a reader has not seen yet (:meth:`MemoryEngine.deliver_delta`)."""

    def has_unseen_delta(self, *, account_id: str, user_id: str, reader: str) -> bool:
        """Whether :meth:`deliver_delta` may have a header for ``reader`` (a read only)."""
        ...

    def deliver_delta(
        self,
        *,
        account_id: str,
        user_id: str,
        reader: str,
        categories: Collection[str] | None = None,
        thread_id: str | None = None,
    ) -> str:
        """``Memory updates since rev {X}:`` and bullets, marking them seen; ``""`` if none."""
        ...
