"""Lexical scoring for the SQLite backend from posting lists held in process.

SQLite adds up an owner's postings per memory with a sort (``GROUP BY`` over every posting of
the question's terms), and that sort is most of a lexical search's time at 100k memories
(docs/retrieval.md, "The query path, in time"). Here the posting lists a question uses are
kept in memory as NumPy arrays and added up there; the database still checks the filter on
the best memories and returns their rows, as it does for the SQL path.

A cached list is used only while it is current: every posting written or deleted sets a new
random version on its term's row in ``token_terms`` (triggers; migration ``term-versions``),
so writes of other processes and cascading deletes are seen, and a question first reads its
terms' versions (one indexed read) and reloads the lists whose version moved. A term whose
row is gone (its last posting deleted, or its owner erased) drops its list. The versions are
read before the lists, so a list is never newer than the version it is kept under, only
older, which costs a reload and never a stale answer.

Libraries that keep BM25 in memory (``bm25s``, ``rank_bm25``, ``tantivy``) build their own index
from text; here the terms are keyed hashes and the postings live in SQLite, written by any
process, so the copy has to follow the table's versions: that part is this module.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from confide.storage.sql import Bm25, SqlExecutor

Owner = tuple[str, str]


class _OwnerNames:
    """The owner's memory ids numbered, so postings of several terms add up by number."""

    __slots__ = ("ids", "lists", "number")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.number: dict[str, int] = {}
        self.lists = 0
        """The owner's lists held (numbered by this)."""

    def numbers(self, memory_ids: Sequence[str]) -> NDArray[np.int64]:
        get = self.number.get
        found = [get(memory_id) for memory_id in memory_ids]
        if None in found:
            for i, memory_id in enumerate(memory_ids):
                if found[i] is None:
                    n = get(memory_id)  # an id repeated within the list got its number
                    if n is None:
                        n = self.number[memory_id] = len(self.ids)
                        self.ids.append(memory_id)
                    found[i] = n
        return np.array(found, np.int64)


class _Postings:
    """One term's postings of one owner: the memories (numbered by ``names``), each one's
    term frequency and length."""

    __slots__ = ("_saturated", "doc_len", "memories", "names", "tf", "version")

    def __init__(
        self,
        version: int,
        names: _OwnerNames,
        memories: NDArray[np.int64],
        tf: NDArray[np.float64],
        doc_len: NDArray[np.float64],
    ) -> None:
        self.version = version
        self.names = names
        self.memories = memories
        self.tf = tf
        self.doc_len = doc_len
        self._saturated: tuple[tuple[float, float, float], NDArray[np.float64]] | None = None

    def saturated(self, k1: float, b: float, avg_len: float) -> NDArray[np.float64]:
        """Each posting's BM25 term-frequency factor (the term's weight apart).

        Kept for the last ``(k1, b, avg_len)``: the average length is cached by the store and
        moves rarely, so most questions reuse it.
        """
        key = (k1, b, avg_len)
        saturated = self._saturated
        if saturated is None or saturated[0] != key:
            tf = self.tf
            factor = tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * self.doc_len / avg_len))
            saturated = self._saturated = (key, factor)
        return saturated[1]


class PostingsCache:
    """Owners' posting lists, by term, kept while their versions hold.

    At most ``max_postings`` postings are held (the least recently used lists go first), and
    an owner's numbering is dropped with its last list or once it numbers ``max_postings``
    memories (the ids of deleted memories stay in it until then).
    """

    def __init__(self, max_postings: int = 2_000_000) -> None:
        self.max_postings = max_postings
        self._lists: OrderedDict[tuple[Owner, int], _Postings] = OrderedDict()
        self._names: dict[Owner, _OwnerNames] = {}
        self._held = 0
        self._lock = threading.Lock()

    @property
    def postings_held(self) -> int:
        """Postings held in memory, every owner together."""
        return self._held

    def clear(self) -> None:
        """Forget every owner's lists."""
        with self._lock:
            self._lists.clear()
            self._names.clear()
            self._held = 0

    def forget(self, owner: Owner) -> None:
        """Forget one owner's lists (an erasure in this process)."""
        with self._lock:
            self._forget(owner)

    def _forget(self, owner: Owner) -> None:
        for key in [key for key in self._lists if key[0] == owner]:
            self._remove(key)
        self._names.pop(owner, None)

    def best(
        self, db: SqlExecutor, owner: Owner, scoring: Bm25, limit: int
    ) -> list[tuple[str, float]]:
        """The owner's ``limit`` best memories by ``scoring`` over all their postings
        (ties by id, as the SQL path orders them), best first."""
        terms = list(scoring.weights)
        marks = ", ".join("?" for _ in terms)
        versions = {
            int(token): int(version)
            for token, version in db.run(
                "SELECT token, version FROM token_terms "
                f"WHERE account_id = ? AND user_id = ? AND token IN ({marks})",
                [*owner, *terms],
            ).fetchall()
        }
        with self._lock:
            held, stale = self._held_lists(owner, terms, versions)
            # Lists add up only under one numbering of the owner's memories. Those held
            # usually share the owner's; a list numbered before its owner's numbering was
            # dropped (its lists evicted) is loaded again under the current one.
            numberings = {id(p.names): p.names for p in held.values()}
            if len(numberings) == 1:
                names = next(iter(numberings.values()))
            else:
                names = self._names.setdefault(owner, _OwnerNames())
                renumber = [t for t, p in held.items() if p.names is not names]
                stale += renumber
                for token in renumber:
                    del held[token]
        if stale:
            held.update(self._load(db, owner, stale, versions, names))
        return _ranked([(scoring.weights[t], p) for t, p in held.items()], scoring, limit)

    def _held_lists(
        self, owner: Owner, terms: list[int], versions: dict[int, int]
    ) -> tuple[dict[int, _Postings], list[int]]:
        """The current lists held for ``terms``, and the terms with postings to load (under
        the lock)."""
        held: dict[int, _Postings] = {}
        stale: list[int] = []
        for token in terms:
            key = (owner, token)
            cached = self._lists.get(key)
            version = versions.get(token)
            if cached is not None and cached.version == version:
                self._lists.move_to_end(key)
                held[token] = cached
                continue
            if cached is not None:
                self._remove(key)
            if version is not None:
                stale.append(token)
        return held, stale

    def _load(
        self,
        db: SqlExecutor,
        owner: Owner,
        terms: list[int],
        versions: dict[int, int],
        names: _OwnerNames,
    ) -> dict[int, _Postings]:
        """The postings of ``terms`` numbered by ``names``, kept for later questions too."""
        marks = ", ".join("?" for _ in terms)
        # One row per term, its postings packed as JSON arrays: a row per posting would
        # take the interpreter lock once per row, while the question is being embedded.
        rows = db.run(
            "SELECT token, json_group_array(memory_id), json_group_array(tf), "
            "json_group_array(doc_len) FROM memory_tokens "
            f"WHERE account_id = ? AND user_id = ? AND token IN ({marks}) GROUP BY token",
            [*owner, *terms],
        ).fetchall()
        parsed = [
            (
                int(token),
                json.loads(memory_ids),
                np.asarray(json.loads(tf), np.float64),
                np.asarray(json.loads(doc_len), np.float64),
            )
            for token, memory_ids, tf, doc_len in rows
        ]
        loaded: dict[int, _Postings] = {}
        with self._lock:
            self._names.setdefault(owner, names)
            for token, memory_ids, tf, doc_len in parsed:
                postings = _Postings(versions[token], names, names.numbers(memory_ids), tf, doc_len)
                loaded[token] = postings
                key = (owner, token)
                if key in self._lists:
                    self._remove(key)
                self._lists[key] = postings
                self._held += len(postings.memories)
                names.lists += 1
            while self._held > self.max_postings and self._lists:
                self._remove(next(iter(self._lists)))
            if len(names.ids) > self.max_postings:
                self._forget(owner)
        return loaded

    def _remove(self, key: tuple[Owner, int]) -> None:
        postings = self._lists.pop(key)
        self._held -= len(postings.memories)
        postings.names.lists -= 1
        if postings.names.lists == 0 and self._names.get(key[0]) is postings.names:
            del self._names[key[0]]


def _ranked(
    lists: list[tuple[float, _Postings]],
    scoring: Bm25,
    limit: int,
) -> list[tuple[str, float]]:
    """BM25 sums per memory over ``lists`` (each with its term's weight); the ``limit``
    best, ties by id."""
    lists = [(w, p) for w, p in lists if len(p.memories)]
    if not lists or limit <= 0:
        return []
    ids = lists[0][1].names.ids
    k1, b, avg_len = scoring.k1, scoring.b, max(scoring.avg_len, 1.0)
    memories = np.concatenate([p.memories for _, p in lists])
    contributions = np.concatenate([w * p.saturated(k1, b, avg_len) for w, p in lists])
    # Each memory's postings in term order, so its sum is added up in one fixed order.
    order = np.argsort(memories, kind="stable")
    grouped = memories[order]
    starts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
    sums = np.add.reduceat(contributions[order], starts)
    numbers = grouped[starts]
    if len(sums) > limit:
        cut = np.partition(sums, len(sums) - limit)[len(sums) - limit]
        kept = sums >= cut  # the cut's ties too, for the order by id to choose among
        sums, numbers = sums[kept], numbers[kept]
    best = sorted(zip((-sums).tolist(), [ids[n] for n in numbers.tolist()], strict=True))
    return [(memory_id, -negated) for negated, memory_id in best[:limit]]
