"""``memory_query``: what an agent gets back when it asks its memory.

Server-side rules, whatever the request says: an unknown agent or a category outside the
agent's allowlist is a :class:`PermissionDeniedError`; every filter runs in the database;
``context: all`` categories are always included for the agent, after the ranked results
(``top_k`` caps the ranked part only), ``rag`` categories only by retrieval (at most
``rag_length`` each); results below ``threshold`` similarity are dropped; the answer never
exceeds ``budget_tokens``.

Related memories (``related_to`` edges): with ``return: "full"`` each ranked result carries
up to two as ``related`` bullets; with ``return: "bullets"`` up to :data:`RELATED_BULLETS`
are appended after every other result, each marked (``"related_to"``: the result it is
related to; its text starts ``[related]``). Either way they are read with the request's own
filter (the agent's allowlist, the user and the visibility rules) and respect each
category's ``rag_length``; last in the answer, they are the first to give way to
``budget_tokens`` and never move a ranked result.

With a :class:`~confide.retrieval.ports.DeltaFeed` the answer starts with the delta header:
the changes to the user's memory the agent has not been shown yet, in the categories it may
read (see :mod:`confide.engine.delta`); delivering it marks them seen, so each shows once.
Its tokens count in ``tokens`` and against ``budget_tokens``, of which it takes at most half
(bullets are dropped, newest kept, until it fits).

With an :class:`~confide.engine.ops.OpsSink` every answer is an operational event (node
``hotpath``, op ``search``, status ``ok`` or ``empty``) whose ``sim`` is the best similarity
among the ranked answers it returns (``None`` when none was ranked by meaning).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from confide.embedders.base import Embedder
from confide.engine.delta import category_label
from confide.engine.ops import OpsSink
from confide.errors import ValidationError
from confide.retrieval.access import AccessTracker
from confide.retrieval.budget import count_tokens
from confide.retrieval.categories import CategoriesConfig, ContextMode
from confide.retrieval.ports import DeltaFeed, MemoryReader
from confide.retrieval.query import Handed, QueryPlan, hand, retrieve
from confide.retrieval.ranking import RankingWeights, ScoredCandidate
from confide.retrieval.source import SharedScope, StorageCandidateSource
from confide.types import (
    Identifier,
    Memory,
    MemoryFilter,
    MemoryType,
    Visibility,
    owner_app_id,
    validated,
)

_STRICT = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
_FILTER_USER = ("user_id", "userId")


def split_user(
    user_id: str | None, filters: Mapping[str, Any]
) -> tuple[str | None, dict[str, Any]]:
    """The user a ``memory_query`` names and its filters without one.

    The user is named at the top level (``user_id``), in ``filters`` (``filters.user_id``,
    or ``userId``), or both alike; the answer is that user (``None`` when neither names one)
    and the other filters.

    Raises:
        ValidationError: ``filters.user_id`` is not a string, or names another user than
            ``user_id`` (the error names both fields).
    """
    rest = {k: v for k, v in filters.items() if k not in _FILTER_USER}
    named = [(k, filters[k]) for k in _FILTER_USER if k in filters]
    for key, value in named:
        if not isinstance(value, str):
            raise ValidationError(f"filters.{key} must be a string", fields=(f"filters.{key}",))
    given = {value for _, value in named} | ({user_id} if user_id is not None else set())
    if len(given) > 1:
        raise ValidationError(
            "user_id and filters.user_id name different users",
            fields=("user_id", *(f"filters.{k}" for k, _ in named)),
        )
    return (given.pop() if given else None), rest


class QueryFilters(BaseModel):
    """Filters a caller may add; ownership (account, user) comes from the request itself."""

    model_config = _STRICT

    agent_id: Identifier | None = None
    run_id: Identifier | None = None
    actor_id: Identifier | None = None
    role: str | None = None
    subject_id: Identifier | None = None
    category: str | None = None
    type: MemoryType | None = None
    visibility: Visibility | None = None
    pinned: bool | None = None
    importance_min: Annotated[int, Field(ge=1, le=5)] | None = None
    importance_max: Annotated[int, Field(ge=1, le=5)] | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None


class MemoryQueryRequest(BaseModel):
    """One ``memory_query`` call; its user is ``user_id``, or ``filters.user_id`` (both
    alike, or :class:`ValidationError`: see :func:`split_user`)."""

    model_config = _STRICT

    agent: Annotated[str, Field(min_length=1, max_length=64)]
    account_id: Identifier
    user_id: Identifier
    query: Annotated[str, Field(min_length=1, max_length=4000)]
    categories: tuple[str, ...] | None = None
    filters: QueryFilters = Field(default_factory=QueryFilters)
    top_k: Annotated[int, Field(ge=1, le=100)] = 3
    return_: Literal["bullets", "full"] = Field(default="bullets", alias="return")
    budget_tokens: Annotated[int, Field(ge=1, le=100_000)] | None = None
    threshold: Annotated[float, Field(ge=-1.0, le=1.0)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _user_in_filters(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("filters"), Mapping):
            return data
        top = data.get("user_id")
        user, filters = split_user(top if isinstance(top, str) else None, data["filters"])
        out = {**data, "filters": filters}
        if user is not None and top is None:
            out["user_id"] = user
        return out


class MemoryQueryResult(BaseModel):
    """The answer: the delta header (``""`` when nothing changed since the agent's last
    answer), ``results`` as bullets or full memories, and the tokens they all take."""

    model_config = ConfigDict(frozen=True)

    header: str = ""
    results: list[dict[str, Any]]
    tokens: int


def header_tokens(header: str) -> int:
    """The tokens a delta header takes in an answer's ``tokens``: its text and the line break
    after it (``0`` for no header)."""
    return count_tokens(header) + 1 if header else 0


# Keys Confide makes up itself: their words say nothing about the value.
_GENERATED_KEYS = frozenset({"note", "insight", "app_memory"})
_GENERATED_PREFIXES = ("conversation_summary", "subject_fact")
# A sibling counter (``likes.2``), a test key's number (``k3``) or an id's hex.
_OPAQUE_PART = re.compile(r"\d+|[a-z]\d+|[0-9a-f]{8,}", re.IGNORECASE)
_KEY_PARTS = re.compile(r"[._\-\s]+")


def key_label(key: str) -> str | None:
    """The words of a memory's key, for a reader: ``daughter_name`` → ``daughter name``,
    ``likes.2`` → ``likes``. ``None`` for a key Confide generated (``note``, ``note.2``,
    ``insight.3``, ``subject_fact.…``) or an opaque one (``k3``, a hex id)."""
    words = [w for w in _KEY_PARTS.split(key.strip()) if w and not _OPAQUE_PART.fullmatch(w)]
    joined = "_".join(words).lower()
    if not words or joined in _GENERATED_KEYS or joined.startswith(_GENERATED_PREFIXES):
        return None
    return " ".join(words)


def display_label(key: str, *, category: str | None, memory_type: str) -> str:
    """A heading for a memory in a listing, never empty: the key's words as :func:`key_label`
    reads them (``daughter_name`` → ``Daughter name``); for a key Confide generated, what it
    is and its own words (``subject_fact.hobby.0a1b2c3d4e5f`` → ``Subject fact: hobby``,
    ``note.2`` → ``Note``); for an opaque key, the memory's category, else its type
    (``k3`` → ``Fact``)."""
    label = key_label(key)
    if label is None:
        segments = [_words(segment) for segment in key.split(".")]
        named = [s for s in segments if s]
        if not named:
            return category_label(category, memory_type)
        label = named[0] + (f": {', '.join(named[1:])}" if len(named) > 1 else "")
    return label[:1].upper() + label[1:]


def _words(segment: str) -> str:
    """A key segment's readable words (counters and hex ids left out)."""
    parts = _KEY_PARTS.split(segment.strip())
    return " ".join(w for w in parts if w and not _OPAQUE_PART.fullmatch(w))


RELATED_BULLETS = 2
"""How many related memories a bullets answer appends, at most."""
RELATED_MARK = "[related] "


def bullet(memory: Memory) -> dict[str, Any]:
    """``{"id", "category", "text": "[category] key label: value"}``, the key's words as
    :func:`key_label` reads them (``[fact] daughter name: Maya``), or ``"[category] value"``
    for a generated or opaque key."""
    category = memory.category or memory.type.value
    label = key_label(memory.key)
    text = (
        f"[{category}] {memory.value}" if label is None else f"[{category}] {label}: {memory.value}"
    )
    return {"id": memory.id, "category": category, "text": text}


def related_bullet(memory: Memory, *, related_to: str) -> dict[str, Any]:
    """:func:`bullet` of a memory related to result ``related_to``, marked: its text
    starts ``[related]`` and ``related_to`` names the result."""
    item = bullet(memory)
    return {**item, "text": RELATED_MARK + item["text"], "related_to": related_to}


class _SideReads:
    """A request's reads beside retrieval, each handed to the workers by :meth:`start` (or run
    by the request's thread if none has started it when it is needed): the
    ``context: all`` listing and whether a delta header is due (usually not; delivering it
    marks the changes seen, so that waits for the answer, and a query that fails does not
    swallow them)."""

    def __init__(
        self,
        listing: Callable[[], list[tuple[Memory, dict[str, Any]]]] | None,
        due: Callable[[], bool] | None,
    ) -> None:
        self._read_listing = listing
        self._read_due = due
        self._listing: Handed[list[tuple[Memory, dict[str, Any]]]] | None = None
        self._due: Handed[bool] | None = None

    def start(self) -> None:
        """Submit the reads (call once)."""
        if self._read_due is not None:
            self._due = hand(self._read_due)
        if self._read_listing is not None:
            self._listing = hand(self._read_listing)

    def listing(self) -> list[tuple[Memory, dict[str, Any]]]:
        """The ``context: all`` memories (none when no such category may be read)."""
        return self._listing.result() if self._listing is not None else []

    def header_due(self) -> bool:
        """Whether the agent has a delta header waiting."""
        return self._due is not None and self._due.result()


class MemoryQueryService:
    """Runs ``memory_query`` over one :class:`MemoryReader` (the engine) with one categories
    configuration."""

    def __init__(
        self,
        reader: MemoryReader,
        categories: CategoriesConfig,
        *,
        embedder: Embedder | None,
        weights: RankingWeights | None = None,
        plan: QueryPlan | None = None,
        access: AccessTracker | None = None,
        context_all_limit: int = 50,
        deltas: DeltaFeed | None = None,
        ops: OpsSink | None = None,
        side_reads_after_embedding: bool = False,
    ) -> None:
        self.reader = reader
        self.ops = ops
        self.categories = categories
        self.embedder = embedder
        self.weights = weights or RankingWeights()
        self.plan = plan or QueryPlan()
        self.access = access
        self.context_all_limit = context_all_limit
        self.deltas = deltas
        self.side_reads_after_embedding = side_reads_after_embedding
        """When the ``context: all`` listing and the delta header's check start on workers:
        with the question (``False``), so they are done by the time the answer needs them,
        or once it is embedded (``True``), so their reads do not take a core from the
        embedding. The wiring chooses by store (:data:`confide.wiring.SIDE_READS_AFTER_EMBEDDING`):
        on PostgreSQL each read is a statement the server answers on the cores the embedding
        needs, on SQLite it is a short read in this process (``bench/scale.py --compare
        side-reads=...``, docs/retrieval.md)."""

    def query(self, request: MemoryQueryRequest | dict[str, Any]) -> MemoryQueryResult:
        """Answer one request; see the module docstring for the rules."""
        req = validated(MemoryQueryRequest, request)
        allowed, base = self._scope(req)
        always = [c for c in allowed if self.categories.spec(c).context is ContextMode.ALL]
        rag = [c for c in allowed if c not in always]
        scope = SharedScope(self.reader, base)  # one shared-memory check per request
        deltas = self.deltas
        side = _SideReads(
            listing=(
                partial(
                    self._context_all, base.model_copy(update={"categories": tuple(always)}), scope
                )
                if always
                else None
            ),
            due=(
                partial(
                    deltas.has_unseen_delta,
                    account_id=req.account_id,
                    user_id=req.user_id,
                    reader=req.agent,
                )
                if deltas is not None
                else None
            ),
        )
        # A query that retrieves nothing (only `context: all` categories) starts them at once.
        after_embedding = self.side_reads_after_embedding and bool(rag)
        if not after_embedding:
            side.start()
        retrieved: list[tuple[Memory, dict[str, Any]]] = []
        related: list[tuple[Memory, dict[str, Any]]] = []
        if rag:
            rag_filter = base.model_copy(update={"categories": tuple(rag)})
            retrieved, related = self._retrieve(
                req,
                rag_filter,
                scope,
                related=True,
                on_embedded=side.start if after_embedding else None,
            )
        # The ranked answers come first: ``top_k`` reads as "my best k", and a caller that
        # keeps the first few bullets must get them, not the standing context; related
        # memories come last, the first to give way to the budget.
        picked = retrieved + side.listing() + related
        header, header_tokens = ("", 0)
        if side.header_due():
            header, header_tokens = self._header(req, allowed)
        budget = None if req.budget_tokens is None else req.budget_tokens - header_tokens
        results, tokens = self._render(req, picked, budget)
        if self.access is not None and results:
            self.access.record(req.account_id, [r["id"] for r in results])
        answered = {r["id"] for r in results}
        self._searched(req, bool(results), [x for m, x in retrieved if m.id in answered])
        return MemoryQueryResult(header=header, results=results, tokens=header_tokens + tokens)

    def _searched(self, req: MemoryQueryRequest, found: bool, ranked: list[dict[str, Any]]) -> None:
        """The answer's operational event: ``sim`` is the best similarity it returns."""
        if self.ops is None:
            return
        sims = [x["similarity"] for x in ranked if x.get("similarity") is not None]
        self.ops.emit_op(
            "hotpath",
            "search",
            account_id=req.account_id,
            user_id=req.user_id,
            status="ok" if found else "empty",
            sim=round(max(sims), 4) if sims else None,
        )

    def _header(self, req: MemoryQueryRequest, allowed: list[str]) -> tuple[str, int]:
        """The delta header for the agent (delivered, so marked seen) and its tokens."""
        if self.deltas is None:
            return "", 0
        header = self.deltas.deliver_delta(
            account_id=req.account_id, user_id=req.user_id, reader=req.agent, categories=allowed
        )
        lines = header.splitlines()
        limit = None if req.budget_tokens is None else req.budget_tokens // 2
        while len(lines) > 1:
            cost = header_tokens("\n".join(lines))
            if limit is None or cost <= limit:
                return "\n".join(lines), cost
            lines.pop()  # the oldest bullet goes first
        return "", 0

    def rank(
        self, request: MemoryQueryRequest | dict[str, Any]
    ) -> list[tuple[Memory, dict[str, Any]]]:
        """Every category the agent may read, ranked by retrieval (``context: all`` ones too).

        The memories with ``{"score", "similarity"}``, best first, at most ``top_k``; the
        same rules as :meth:`query` (allowlist, filters, ``threshold``, per-category
        ``rag_length``), without the ``context: all`` listing, rendering or token budget.
        """
        req = validated(MemoryQueryRequest, request)
        allowed, base = self._scope(req)
        scope = SharedScope(self.reader, base)
        ranked, _ = self._retrieve(
            req.model_copy(update={"return_": "bullets"}),
            base.model_copy(update={"categories": tuple(allowed)}),
            scope,
            related=False,
        )
        if self.access is not None and ranked:
            self.access.record(req.account_id, [m.id for m, _ in ranked])
        self._searched(req, bool(ranked), [x for _, x in ranked])
        return ranked

    def _scope(self, req: MemoryQueryRequest) -> tuple[list[str], MemoryFilter]:
        """The categories the request may read and the filter every search runs with."""
        allowed = self.categories.resolve(req.agent, req.categories)
        f = req.filters
        if f.category is not None:
            allowed = self.categories.resolve(req.agent, (f.category,))
        base = MemoryFilter(
            account_id=req.account_id,
            user_id=req.user_id,
            # An app's owner (``app:<app_id>``, an admin's only: the gate checks) searches
            # that app's scope, which a filter without an app leaves out.
            app_id=owner_app_id(req.user_id),
            include_shared=True,
            agent_id=f.agent_id,
            run_id=f.run_id,
            actor_id=f.actor_id,
            role=f.role,
            subject_id=f.subject_id,
            types=None if f.type is None else (f.type,),
            visibility=f.visibility,
            pinned=f.pinned,
            importance_min=f.importance_min,
            importance_max=f.importance_max,
            updated_after=f.updated_after,
            updated_before=f.updated_before,
        )
        return list(allowed), base

    def _context_all(
        self, flt: MemoryFilter, scope: SharedScope
    ) -> list[tuple[Memory, dict[str, Any]]]:
        listed = self.reader.list_memories(scope.narrow(flt), limit=self.context_all_limit)
        return [(memory, {"context": "all"}) for memory in listed]

    def _retrieve(
        self,
        req: MemoryQueryRequest,
        flt: MemoryFilter,
        scope: SharedScope,
        *,
        related: bool,
        on_embedded: Callable[[], None] | None = None,
    ) -> tuple[list[tuple[Memory, dict[str, Any]]], list[tuple[Memory, dict[str, Any]]]]:
        """The ranked results, and (``related``, in a bullets answer) the related memories
        to append after every other result; ``on_embedded`` as :func:`retrieve` calls it."""
        source = StorageCandidateSource(
            self.reader, flt, scope, vector_expected=self.embedder is not None
        )
        limit = max(req.top_k * 3, 10)
        # Work sized to the answer: a three-bullet answer needs no hundred candidates, and
        # reading 2 * limit in full and following the edges of 1.5 * limit ranked as well
        # as 40 and 30 on LoCoMo (recall@3/5/10 within 0.005).
        plan = replace(
            self.plan,
            dense_limit=min(self.plan.dense_limit, max(40, 3 * limit)),
            lexical_limit=min(self.plan.lexical_limit, max(40, 3 * limit)),
            hydrate_top=min(self.plan.hydrate_top, 2 * limit),
            expand_top=limit + limit // 2,
        )
        ranked: list[ScoredCandidate] = retrieve(
            source,
            req.query,
            embedder=self.embedder,
            limit=limit,
            weights=self.weights,
            plan=plan,
            on_embedded=on_embedded,
        )
        per_category: dict[str, int] = {}
        out: list[tuple[Memory, dict[str, Any]]] = []
        for scored in ranked:
            memory = source.memory(scored.candidate.id)
            if memory is None:
                continue
            similarity = scored.candidate.dense
            if req.threshold is not None and (similarity is None or similarity < req.threshold):
                continue
            if not self._take(memory, per_category):
                continue
            out.append((memory, {"score": round(scored.score, 4), "similarity": similarity}))
            if len(out) >= req.top_k:
                break
        if not related or not out:
            return out, []
        others = self._related(source, [m.id for m, _ in out])
        if req.return_ == "full":
            for memory, extra in out:
                extra["related"] = [bullet(m) for m in others.get(memory.id, [])]
            return out, []
        return out, self._appended(out, others, per_category)

    def _take(self, memory: Memory, per_category: dict[str, int]) -> bool:
        """Count ``memory`` in ``per_category``, unless its category's ``rag_length`` is
        reached (then ``False``)."""
        category = memory.category or memory.type.value
        known = self.categories.all_categories().get(category)
        cap = None if known is None else known.rag_length
        if cap is not None and per_category.get(category, 0) >= cap:
            return False
        per_category[category] = per_category.get(category, 0) + 1
        return True

    def _appended(
        self,
        ranked: list[tuple[Memory, dict[str, Any]]],
        others: dict[str, list[Memory]],
        per_category: dict[str, int],
    ) -> list[tuple[Memory, dict[str, Any]]]:
        """Up to :data:`RELATED_BULLETS` related memories, the best result's first."""
        seen = {m.id for m, _ in ranked}
        out: list[tuple[Memory, dict[str, Any]]] = []
        for memory, _ in ranked:
            for other in others.get(memory.id, []):
                if len(out) >= RELATED_BULLETS:
                    return out
                if other.id in seen or not self._take(other, per_category):
                    continue
                seen.add(other.id)
                out.append((other, {"related_to": memory.id}))
        return out

    def _related(
        self, source: StorageCandidateSource, memory_ids: list[str]
    ) -> dict[str, list[Memory]]:
        """Up to two ``related_to`` memories per result, strongest first, that the request's
        filter reaches (from the edges retrieval followed; one edges query for the rest)."""
        wanted = set(memory_ids)
        others: dict[str, list[tuple[float, str]]] = {m: [] for m in memory_ids}
        for e in source.edges_of(memory_ids):
            if e.relation_type != "related_to":
                continue
            for here, there in ((e.from_id, e.to_id), (e.to_id, e.from_id)):
                if here in wanted and there not in wanted:
                    others[here].append((e.strength, there))
        # A memory has a handful of edges (``link_top_k`` and consolidation's): all of them
        # are considered, so one outside the filter leaves room for the next strongest.
        found = source.load(sorted({i for o in others.values() for _, i in o}))
        return {
            m: [found[i] for _, i in sorted(o, reverse=True) if i in found][:2]
            for m, o in others.items()
        }

    def _render(
        self,
        req: MemoryQueryRequest,
        picked: list[tuple[Memory, dict[str, Any]]],
        budget: int | None,
    ) -> tuple[list[dict[str, Any]], int]:
        results: list[dict[str, Any]] = []
        used = 0
        seen: set[str] = set()
        for memory, extra in picked:
            if memory.id in seen:
                continue
            seen.add(memory.id)
            if req.return_ == "bullets":
                of = extra.get("related_to")
                item = bullet(memory) if of is None else related_bullet(memory, related_to=of)
                text = item["text"]
            else:
                item = {**memory.model_dump(mode="json"), **extra}
                text = memory.value + "".join(r["text"] for r in extra.get("related", []))
            cost = count_tokens(text) + 1
            if budget is not None and used + cost > budget:
                continue  # a shorter item further down may still fit
            used += cost
            results.append(item)
        return results, used
