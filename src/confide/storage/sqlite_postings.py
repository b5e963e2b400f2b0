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

import numpy as np
from numpy.typing import NDArray

from confide.storage.sql import Bm25, SqlExecutor

Owner = tuple[str, str]


class _Postings:
    """One term's postings of one owner: the memories (their ids as UTF-8 bytes, in one
    fixed-width array, so postings of several terms add up without an object per posting),
    each one's term frequency and length."""

    __slots__ = ("_saturated", "doc_len", "ids", "tf", "version")

    def __init__(
        self,
        version: int,
        ids: NDArray[np.bytes_],
        tf: NDArray[np.float64],
        doc_len: NDArray[np.float64],
    ) -> None:
        self.version = version
        self.ids = ids
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

    At most ``max_postings`` postings are held (about 50 bytes each with 36-character ids);
    the least recently used lists go first.
    """

    def __init__(self, max_postings: int = 1_000_000) -> None:
        self.max_postings = max_postings
        self._lists: OrderedDict[tuple[Owner, int], _Postings] = OrderedDict()
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
            self._held = 0

    def forget(self, owner: Owner) -> None:
        """Forget one owner's lists (an erasure in this process)."""
        with self._lock:
            for key in [key for key in self._lists if key[0] == owner]:
                self._remove(key)

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
        if stale:
            held.update(self._load(db, owner, stale, versions))
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
        self, db: SqlExecutor, owner: Owner, terms: list[int], versions: dict[int, int]
    ) -> dict[int, _Postings]:
        """The postings of ``terms``, kept for later questions too."""
        marks = ", ".join("?" for _ in terms)
        # One row per term, its postings packed: the ids run together (split by width when
        # they all have one) and each frequency and length as eight hex digits. A row per
        # posting, or a Python object per posting, would hold the interpreter lock for
        # longer than the database takes to add the postings up itself.
        rows = db.run(
            "SELECT token, group_concat(memory_id, ''), "
            "min(length(CAST(memory_id AS BLOB))), max(length(CAST(memory_id AS BLOB))), "
            "group_concat(printf('%08x%08x', tf, doc_len), '') FROM memory_tokens "
            f"WHERE account_id = ? AND user_id = ? AND token IN ({marks}) GROUP BY token",
            [*owner, *terms],
        ).fetchall()
        loaded: dict[int, _Postings] = {}
        for token, joined, narrowest, widest, numbers in rows:
            if narrowest != widest:  # ids of several widths (not the engine's own)
                loaded[int(token)] = self._one_by_one(db, owner, int(token), versions)
                continue
            pairs = np.frombuffer(bytes.fromhex(numbers), dtype=">u4").reshape(-1, 2)
            loaded[int(token)] = _Postings(
                versions[int(token)],
                np.frombuffer(joined.encode(), dtype=f"S{widest}"),
                pairs[:, 0].astype(np.float64),
                pairs[:, 1].astype(np.float64),
            )
        with self._lock:
            for token, postings in loaded.items():
                key = (owner, token)
                if key in self._lists:
                    self._remove(key)
                self._lists[key] = postings
                self._held += len(postings.ids)
            while self._held > self.max_postings and self._lists:
                self._remove(next(iter(self._lists)))
        return loaded

    @staticmethod
    def _one_by_one(
        db: SqlExecutor, owner: Owner, token: int, versions: dict[int, int]
    ) -> _Postings:
        """A term's postings read as JSON arrays, each id an object of its own."""
        ids, tf, doc_len = db.run(
            "SELECT json_group_array(memory_id), json_group_array(tf), "
            "json_group_array(doc_len) FROM memory_tokens "
            "WHERE account_id = ? AND user_id = ? AND token = ?",
            [*owner, token],
        ).fetchone()
        return _Postings(
            versions[token],
            np.array([i.encode() for i in json.loads(ids)], dtype=np.bytes_),
            np.asarray(json.loads(tf), np.float64),
            np.asarray(json.loads(doc_len), np.float64),
        )

    def _remove(self, key: tuple[Owner, int]) -> None:
        postings = self._lists.pop(key)
        self._held -= len(postings.ids)


def _ranked(
    lists: list[tuple[float, _Postings]],
    scoring: Bm25,
    limit: int,
) -> list[tuple[str, float]]:
    """BM25 sums per memory over ``lists`` (each with its term's weight); the ``limit``
    best, ties by id."""
    lists = [(w, p) for w, p in lists if len(p.ids)]
    if not lists or limit <= 0:
        return []
    k1, b, avg_len = scoring.k1, scoring.b, max(scoring.avg_len, 1.0)
    ids = np.concatenate([p.ids for _, p in lists])
    contributions = np.concatenate([w * p.saturated(k1, b, avg_len) for w, p in lists])
    # Ids in byte order, as SQLite orders text, so a stable sort by score keeps ties by id.
    unique, memory = np.unique(ids, return_inverse=True)
    sums = np.bincount(memory.ravel(), weights=contributions)
    if len(sums) > limit:
        cut = np.partition(sums, len(sums) - limit)[len(sums) - limit]
        kept = np.flatnonzero(sums >= cut)  # with the cut's ties, for the order by id
    else:
        kept = np.arange(len(sums))
    best = kept[np.argsort(-sums[kept], kind="stable")][:limit]
    return [
        (memory_id.decode(), score)
        for memory_id, score in zip(unique[best].tolist(), sums[best].tolist(), strict=True)
    ]
