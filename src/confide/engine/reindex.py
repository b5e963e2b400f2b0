"""Rebuild every live memory version's index rows: ``confide reindex``.

The store forgets its bound embedder and every stored vector, binds the new one (if any),
then re-writes the search terms of every active and soft-deleted memory version with the
current tokenizer and embeds it, owner by owner, in batches, writing each batch's terms,
vectors and relation edges in one transaction. Last, the store records the tokenizer version.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from confide.embedders.base import Embedder
from confide.index.lexical import Indexer, record_tokenizer_version
from confide.index.vectors import VectorIndexer
from confide.types import Memory, MemoryState, Progress

if TYPE_CHECKING:
    from confide.engine import MemoryEngine

__all__ = ["count_live", "live_owners", "reindex"]

_LIVE = frozenset({MemoryState.ACTIVE.value, MemoryState.SOFT_DELETED.value})


def live_owners(engine: MemoryEngine) -> list[tuple[str, str]]:
    """Every ``(account_id, user_id)`` that holds a user key (and so may own memories)."""
    rows = engine.key_store.rows(limit=2**31 - 1)
    return sorted({(r.account_id, r.user_id) for r in rows if r.purpose == "user"})


def _batches(engine: MemoryEngine, size: int) -> Iterator[list[Memory]]:
    for account_id, user_id in live_owners(engine):
        batch: list[Memory] = []
        for row in engine.storage.iter_owner(account_id, user_id):
            if row.state not in _LIVE:
                continue
            batch.extend(engine.open_rows([row]))  # a tampered row is left out (and counted)
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch


def count_live(engine: MemoryEngine) -> int:
    """How many memory versions :func:`reindex` will index."""
    return sum(
        1
        for account_id, user_id in live_owners(engine)
        for row in engine.storage.iter_owner(account_id, user_id)
        if row.state in _LIVE
    )


def reindex(
    engine: MemoryEngine,
    embedder: Embedder | None,
    *,
    batch_size: int = 64,
    link_top_k: int = 5,
    link_min: float = 0.5,
    run_context: float = 0.6,
    progress: Progress | None = None,
) -> int:
    """Re-index every live version; returns the count.

    Drops every vector, binds ``embedder`` (``None``: the store keeps no vectors) and writes
    each version's search terms, made by the current tokenizer, and its vector and edges;
    then records the tokenizer version, so an engine refusing the store's terms (see
    :class:`~confide.errors.TokenizerMismatchError`) opens it again. ``engine`` may be one
    opened with ``reindexing=True``. ``progress`` is told how many versions are written, of
    how many (:func:`count_live`, counted first when it is given). Interrupted, the command
    can simply be run again.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    engine.storage.unbind_embedder()
    indexers: list[Indexer] = [engine.lexical]
    if embedder is not None:
        vectors = VectorIndexer(
            engine.storage,
            embedder,
            link_top_k=link_top_k,
            link_min=link_min,
            run_context=run_context,
        )
        vectors.seal_with(engine.vector_seal)
        indexers.append(vectors)
    total = count_live(engine) if progress is not None else None
    done = 0
    if progress is not None:
        progress(0, total)
    for batch in _batches(engine, batch_size):
        _write(engine, indexers, batch)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    with engine.storage.transaction() as tx:
        record_tokenizer_version(tx)
    return done


def _write(engine: MemoryEngine, indexers: Sequence[Indexer], batch: Sequence[Memory]) -> None:
    prepared = [indexer.prepare(batch) for indexer in indexers]
    with engine.storage.transaction() as tx:
        for position, memory in enumerate(batch):
            for indexer, entries in zip(indexers, prepared, strict=True):
                indexer.write(tx, memory, entries[position])
