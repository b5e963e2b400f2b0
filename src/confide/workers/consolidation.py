"""Daily consolidation: memories of one user that state the same fact become one.

For each user (:meth:`Consolidator.run_user`; :meth:`Consolidator.run_account` for every user
of an account):

1. **Candidates**: active memories changed in the last ``consolidation_changed_hours`` (72),
   of importance 3 or more, or among the user's top tenth by retrievals.
2. **Pairs**: each candidate with its ``consolidation_neighbours`` nearest memories (the
   vector index). A pair goes on when its cosine lies in the band
   ``consolidation_cosine_min``..``consolidation_cosine_max``, both memories changed within
   ``consolidation_recent_days`` (90), they are of one type, subject and visibility, and
   they share a search term or both state numbers (a numeric step: "walks 2 miles" /
   "walks 3 miles"). A pair whose fingerprint (the two ids and the cosine to two decimals)
   was judged within ``consolidation_recheck_days`` (14) is skipped; at most
   ``consolidation_pairs_per_day`` (50) pairs a user are judged per UTC day.
3. **Judge**: a :class:`~confide.workers.judges.SameFactJudge` decides every pair before
   anything is written, so a judge that fails (the model unreachable) leaves the data as it
   was and the job can be retried.
4. **Merge**: pairs judged the same fact join groups (never two memories judged different);
   each group becomes one new version of its oldest memory (the value that says the most,
   or the judge's wording; the highest importance and confidence; the tags of all), with
   ``merged_from`` edges to every source version, a ``MERGE`` history event and change-log
   entry on it and a ``MERGE`` event on each memory merged away, which leaves retrieval
   (soft-deleted: restorable until purged). Pairs judged different get a ``related_to`` edge.
   Operational events: node ``worker``, ops ``merge`` and ``link``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from confide.config import Settings
from confide.engine import Link, MemoryEngine
from confide.errors import ConflictError
from confide.index.tokenize import terms
from confide.storage.base import EdgeRow, MemoryRow, OpRow, Page, Transaction, Vector
from confide.storage.consolidation import SqlConsolidationTables
from confide.types import APP_OWNER_PREFIX, HistoryEventType, Memory, MemoryFilter, utcnow
from confide.workers.judges import Pair, SameFactJudge, Verdict, numbers_in

__all__ = ["ConsolidationReport", "Consolidator", "fingerprint", "merge_groups"]

log = logging.getLogger(__name__)

ACTOR = "worker:consolidation"
MERGED_FROM = "merged_from"
RELATED = "related_to"
_DAY = 86_400.0
_PAGE = 1000
_VECTOR_CHUNK = 256
_MAX_USERS = 1_000_000


def _pair_cosine(low: Vector | None, high: Vector | None, hit: float) -> float:
    """Cosine of two stored vectors, always taken in the pair's id order (so the same
    float whichever side asked); the index hit's score when one vector is missing."""
    if low is None or high is None:
        return hit
    a, b = low.astype(np.float64), high.astype(np.float64)
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return hit if norms == 0.0 else min(1.0, float(a @ b) / norms)


def _nearby_prints(pair: Pair) -> tuple[str, ...]:
    """The pair's fingerprint and those of the scores just below and above it."""
    return tuple(
        dict.fromkeys(
            fingerprint(pair.first.id, pair.second.id, pair.score + nudge)
            for nudge in (0.0, -0.004, 0.004)
        )
    )


def fingerprint(first_id: str, second_id: str, score: float) -> str:
    """The stored fingerprint of a pair: a digest of both ids (in either order) and the
    cosine rounded to two decimals, so a pair whose memories or closeness changed is new."""
    low, high = sorted((first_id, second_id))
    return hashlib.sha256(f"{low}|{high}|{round(score, 2):.2f}".encode()).hexdigest()


@dataclass(slots=True)
class ConsolidationReport:
    """What one run did for one user (counts only, no memory text)."""

    account_id: str
    user_id: str
    judge: str
    candidates: int = 0
    """Memories examined as candidates."""
    pairs: int = 0
    """Pairs that passed the pre-filters and were not judged recently."""
    skipped: int = 0
    """Pairs skipped because they were judged within the recheck period."""
    judged: int = 0
    undecided: int = 0
    same: int = 0
    merges: int = 0
    """New versions written, each folding one group of memories into one."""
    merged_away: int = 0
    """Memories that left retrieval by being merged into another."""
    links: int = 0
    conflicts: int = 0
    """Groups not merged because one of their memories changed meanwhile (next run)."""
    capped: bool = False
    """The daily pair cap was reached (or had been before this run)."""
    deferred: bool = False
    """The judge was not available (a low LLM budget): nothing was judged."""
    merged_ids: list[str] = field(default_factory=list)
    """Ids of the new versions the merges wrote."""


@dataclass(slots=True)
class _Found:
    pairs: list[Pair] = field(default_factory=list)
    candidates: int = 0
    skipped: int = 0
    capped: bool = False


class Consolidator:
    """Merges memories of a user that state the same fact (see the module docstring).

    Args:
        engine: the memory engine (its store must be indexed with an embedder).
        judge: decides which pairs are one fact (the offline judge without an LLM).
        settings: the ``consolidation_*`` settings (default: the engine's).
        max_candidates: candidates one run examines at most (``None``: all), bounding its
            runtime; the rest wait for the next run.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        judge: SameFactJudge,
        settings: Settings | None = None,
        *,
        max_candidates: int | None = None,
    ) -> None:
        self.engine = engine
        self.judge = judge
        self.settings = settings or engine.settings
        self.tables = SqlConsolidationTables(engine.storage.database)
        self.max_candidates = max_candidates

    async def run_account(
        self, account_id: str, *, now: datetime | None = None
    ) -> list[ConsolidationReport]:
        """:meth:`run_user` for every user of the account with memories (app scopes aside)."""
        users = await asyncio.to_thread(self.engine.storage.user_ids, account_id, limit=_MAX_USERS)
        return [
            await self.run_user(account_id=account_id, user_id=user, now=now)
            for user in users
            if not user.startswith(APP_OWNER_PREFIX)
        ]

    async def run_user(
        self, *, account_id: str, user_id: str, now: datetime | None = None
    ) -> ConsolidationReport:
        """Consolidate one user's memories as of ``now`` (default: the current time).

        Raises:
            ProviderError: the judge's model failed; nothing was written.
            StorageError: the database failed.
        """
        when = now or utcnow()
        report = ConsolidationReport(account_id, user_id, self.judge.name)
        left = await asyncio.to_thread(self._pairs_left, account_id, user_id, when)
        if left <= 0:
            report.capped = True
            return report
        if not self.judge.available(account_id):
            report.deferred = True
            return report
        found = await asyncio.to_thread(self._find_pairs, account_id, user_id, when, left)
        report.candidates, report.skipped, report.capped = (
            found.candidates,
            found.skipped,
            found.capped,
        )
        report.pairs = len(found.pairs)
        if not found.pairs:
            return report
        verdicts = await self.judge.judge(found.pairs, account_id=account_id, user_id=user_id)
        await asyncio.to_thread(self._apply, found.pairs, verdicts, when, report)
        return report

    # ---- finding pairs -------------------------------------------------------------------
    def _pairs_left(self, account_id: str, user_id: str, when: datetime) -> int:
        ts = when.timestamp()
        recheck = self.settings.consolidation_recheck_days * _DAY
        self.tables.forget_judged(account_id, user_id, ts - recheck)
        today = self.tables.judged_since(account_id, user_id, ts - ts % _DAY)
        return self.settings.consolidation_pairs_per_day - today

    def _candidates(self, flt: MemoryFilter, when: datetime) -> Iterator[MemoryRow]:
        """Candidate rows, each once: recently changed (newest first), most retrieved,
        important."""
        storage = self.engine.storage
        changed = flt.model_copy(
            update={
                "updated_after": when - timedelta(hours=self.settings.consolidation_changed_hours)
            }
        )
        yield from self._paged(changed)
        total = storage.count_memories(flt)
        top = self.tables.most_retrieved(flt.account_id, flt.user_id or "", math.ceil(total / 10))
        rank = {memory_id: position for position, memory_id in enumerate(top)}
        for start in range(0, len(top), _PAGE):
            rows = storage.filter_memories(flt, top[start : start + _PAGE])
            yield from sorted(rows, key=lambda r: rank[r.id])
        yield from self._paged(flt.model_copy(update={"importance_min": 3}))

    def _paged(self, flt: MemoryFilter) -> Iterator[MemoryRow]:
        offset = 0
        while True:
            rows = self.engine.storage.list_memories(flt, Page(limit=_PAGE, offset=offset))
            yield from rows
            if len(rows) < _PAGE:
                return
            offset += _PAGE

    def _find_pairs(self, account_id: str, user_id: str, when: datetime, left: int) -> _Found:
        cfg = self.settings
        flt = MemoryFilter(account_id=account_id, user_id=user_id)
        recent_since = when - timedelta(days=cfg.consolidation_recent_days)
        recent = flt.model_copy(update={"updated_after": recent_since})
        index = self.engine.search_index
        found = _Found()
        seen_candidates: set[str] = set()
        seen_pairs: set[tuple[str, str]] = set()
        opened: dict[str, Memory | None] = {}
        chunk: list[MemoryRow] = []

        def flush() -> bool:
            """Pair the chunk's candidates; True once the day's pairs are found."""
            vectors = index.vectors(account_id, [r.id for r in chunk])
            hits_of: dict[str, list[tuple[str, float, MemoryRow | None]]] = {}
            for row in chunk:
                vector = vectors.get(row.id)
                if vector is None:
                    continue
                hits = index.vector_search(recent, vector, cfg.consolidation_neighbours + 1)
                # Stored vectors are quantised: a cosine may come back a hair above 1.
                hits_of[row.id] = [(h.memory_id, min(1.0, h.score), h.row) for h in hits]
            # The pair's score from both stored vectors, the same whichever memory of the pair
            # was the query (an index hit's score depends on the direction through
            # quantisation, and a fingerprint must not change with the candidates' order).
            neighbours = {i for hits in hits_of.values() for i, _, _ in hits} - vectors.keys()
            if neighbours:
                vectors = {**vectors, **index.vectors(account_id, sorted(neighbours))}
            wanted = [r for r in chunk if r.id not in opened]
            wanted_ids = {i for hits in hits_of.values() for i, _, _ in hits} - opened.keys()
            known = {row.id: row for hits in hits_of.values() for _, _, row in hits if row}
            missing = [i for i in wanted_ids if i not in known]
            rows = [*wanted, *(known[i] for i in wanted_ids if i in known)]
            rows += self.engine.rows_in_filter(recent, missing) if missing else []
            for memory in self.engine.open_rows(rows):
                opened[memory.id] = memory
            pending: list[Pair] = []
            for row in chunk:
                for other_id, score, _ in hits_of.get(row.id, []):
                    ids = (min(row.id, other_id), max(row.id, other_id))
                    if other_id == row.id or ids in seen_pairs:
                        continue
                    seen_pairs.add(ids)
                    score = _pair_cosine(vectors.get(ids[0]), vectors.get(ids[1]), score)
                    first, second = opened.get(row.id), opened.get(other_id)
                    if first is None or second is None:
                        continue
                    if self._passes(first, second, score, recent_since):
                        pending.append(Pair(first, second, score))
            if pending:
                # A score read again may differ in its last bits (the vectors come from the
                # index or the table, quantised or not): a pair whose rounded score is a
                # neighbour of the judged one's counts as the same pair.
                prints = [_nearby_prints(p) for p in pending]
                recheck_since = when.timestamp() - cfg.consolidation_recheck_days * _DAY
                judged = self.tables.judged(account_id, user_id, [m for ms in prints for m in ms])
                for pair, marks in zip(pending, prints, strict=True):
                    last = max(judged.get(m, -math.inf) for m in marks)
                    if last >= recheck_since:
                        found.skipped += 1
                    elif len(found.pairs) < left:
                        found.pairs.append(pair)
                    else:
                        found.capped = True
                        return True
            chunk.clear()
            return len(found.pairs) >= left

        for row in self._candidates(flt, when):
            if self.max_candidates is not None and found.candidates >= self.max_candidates:
                break
            if row.id in seen_candidates or row.updated_at < recent_since.timestamp():
                continue
            seen_candidates.add(row.id)
            found.candidates += 1
            chunk.append(row)
            if len(chunk) >= _VECTOR_CHUNK and flush():
                found.capped = found.capped or len(found.pairs) >= left
                return found
        if chunk:
            flush()
        found.capped = found.capped or len(found.pairs) >= left
        return found

    def _passes(self, first: Memory, second: Memory, score: float, since: datetime) -> bool:
        """The no-LLM pre-filters (see the module docstring)."""
        cfg = self.settings
        if not cfg.consolidation_cosine_min <= score <= cfg.consolidation_cosine_max:
            return False
        if first.updated_at < since or second.updated_at < since:
            return False
        if (first.type, first.subject_id, first.visibility, first.app_id) != (
            second.type,
            second.subject_id,
            second.visibility,
            second.app_id,
        ):
            return False
        if set(terms(first.value)) & set(terms(second.value)):
            return True
        return bool(numbers_in(first.value)) and bool(numbers_in(second.value))

    # ---- writing -------------------------------------------------------------------------
    def _apply(
        self,
        pairs: Sequence[Pair],
        verdicts: Sequence[Verdict | None],
        when: datetime,
        report: ConsolidationReport,
    ) -> None:
        decided = [(p, v) for p, v in zip(pairs, verdicts, strict=True) if v is not None]
        report.judged = len(decided)
        report.undecided = len(pairs) - len(decided)
        report.same = sum(v.same for _, v in decided)
        account_id, user_id = report.account_id, report.user_id
        for group, best, worded in merge_groups(decided):
            try:
                merged = self._merge(group, best, worded, when)
            except ConflictError:
                report.conflicts += 1
                continue
            report.merges += 1
            report.merged_away += len(group) - 1
            report.merged_ids.append(merged.id)
        gone = {m.id for p, v in decided if v.same for m in (p.first, p.second)}
        links = [p for p, v in decided if not v.same and not {p.first.id, p.second.id} & gone]
        if links:
            report.links = self._link(links, when)
        # Recorded last: a pair whose merge failed on a conflict is judged again next run
        # (its memories have new versions, so new fingerprints).
        self.tables.record_judged(
            account_id,
            user_id,
            [
                (fingerprint(p.first.id, p.second.id, p.score), "same" if v.same else "different")
                for p, v in decided
            ],
            when.timestamp(),
        )

    def _merge(
        self, group: Sequence[Memory], best: float, worded: str | None, when: datetime
    ) -> Memory:
        survivor = min(group, key=lambda m: (m.created_at, m.id))
        others = [m for m in group if m.id != survivor.id]
        # The wording that says the most (distinct search terms), the newest among equals.
        fullest = max(group, key=lambda m: (len(set(terms(m.value))), m.updated_at, m.id))
        tags = list(dict.fromkeys(t for m in group for t in m.tags))[:32]
        patch: dict[str, Any] = {
            "value": worded or fullest.value,
            "importance": max(m.importance for m in group),
            "confidence": max(m.confidence for m in group),
            "pinned": any(m.pinned for m in group),
            "tags": tuple(tags),
        }
        sources = [m.id for m in group]

        def link_sources(tx: Transaction, written: Sequence[Memory]) -> None:
            new = written[0]
            tx.put_edges(
                new.account_id,
                new.user_id,
                [EdgeRow(new.id, source, MERGED_FROM, 1.0) for source in sources],
            )
            tx.record_op(_op(new, "merge", best, when))

        written = self.engine.commit_batch(
            revisions=[(survivor, patch)],
            forget=others,
            within=link_sources,
            event=HistoryEventType.MERGE,
            forget_event=HistoryEventType.MERGE,
            meta={
                "merged_ids": [m.id for m in others],
                "survivor": survivor.id,
                "judge": self.judge.name,
            },
            actor=ACTOR,
        )
        return written[0]

    def _link(self, pairs: Sequence[Pair], when: datetime) -> int:
        account_id, user_id = pairs[0].first.account_id, pairs[0].first.user_id
        # A pair the store already links (its write found the other as a neighbour) gets no
        # new edge, so no LINK event either.
        ids = list({m.id for p in pairs for m in (p.first, p.second)})
        linked = {
            frozenset((e.from_id, e.to_id)) for e in self.engine.storage.edges(account_id, ids)
        }
        with self.engine.storage.transaction() as tx:
            tx.put_edges(
                account_id,
                user_id,
                [EdgeRow(p.first.id, p.second.id, RELATED, round(p.score, 4)) for p in pairs],
            )
            for pair in pairs:
                tx.record_op(_op(pair.first, "link", pair.score, when))
                if frozenset((pair.first.id, pair.second.id)) not in linked:
                    link = Link(pair.second.id, RELATED, round(pair.score, 4))
                    self.engine.audit_links(tx, pair.first, [link], actor=ACTOR)
        return len(pairs)


def _op(memory: Memory, op: str, score: float, when: datetime) -> OpRow:
    return OpRow(
        memory.account_id,
        memory.user_id,
        None,
        "worker",
        op,
        "ok",
        memory.id,
        memory.category,
        round(score, 4),
        when.timestamp(),
    )


def merge_groups(
    decided: Sequence[tuple[Pair, Verdict]],
) -> list[tuple[list[Memory], float, str | None]]:
    """Memories to merge, grouped: pairs judged the same fact join their groups, best
    score first, unless some pair across the two groups was judged different. Each group
    comes with its best score and the judge's wording of its best pair (if any)."""
    apart = {frozenset((p.first.id, p.second.id)) for p, v in decided if not v.same}
    group_of: dict[str, int] = {}
    groups: dict[int, list[Memory]] = {}
    best: dict[int, tuple[float, str | None]] = {}
    same = sorted((pv for pv in decided if pv[1].same), key=lambda pv: -pv[0].score)
    numbers = itertools.count()
    for pair, verdict in same:
        for memory in (pair.first, pair.second):
            if memory.id not in group_of:
                number = next(numbers)
                group_of[memory.id] = number
                groups[number] = [memory]
        a, b = group_of[pair.first.id], group_of[pair.second.id]
        if a == b:
            continue
        if any(frozenset((x.id, y.id)) in apart for x in groups[a] for y in groups[b]):
            continue
        for memory in groups.pop(b):
            group_of[memory.id] = a
            groups[a].append(memory)
        previous = best.pop(b, None)
        mine = best.get(a)
        candidates = [c for c in (mine, previous, (pair.score, verdict.merged)) if c is not None]
        best[a] = max(candidates, key=lambda c: c[0])
    return [(members, *best[key]) for key, members in groups.items() if len(members) > 1]
