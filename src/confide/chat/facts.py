"""Facts about a subject (a person, a pet, a company), kept per user, private or shared.

A fact is a memory: type ``fact``, category :data:`FACT_MEMORY_CATEGORY`, the subject in
``subject_id``, the fact's own category in its sealed metadata and a key from a fixed
vocabulary (``subject_fact.<category>.<n>``; never free text). So it is encrypted,
indexed, versioned, audited and erased like every memory. New facts are private.

De-duplication compares a new fact with the user's own facts of the subject by word
overlap (the share of distinct terms both use): at :attr:`SubjectFacts.duplicate` or more
it is the same fact and nothing is written; from :attr:`SubjectFacts.contradiction` with
the same category it restates the old fact differently (``Rex is 6`` after ``Rex is 5``)
and supersedes it as a new version, whose history keeps the old one. Word overlap is
deterministic and needs no embedder, so the offline path behaves the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confide.chat.types import FactCategory, SubjectFact
from confide.engine import MemoryEngine
from confide.errors import NotFoundError
from confide.index.tokenize import terms
from confide.types import (
    Memory,
    MemoryFilter,
    MemoryState,
    MemoryType,
    Source,
    Visibility,
)

__all__ = ["FACT_MEMORY_CATEGORY", "ExtractedFact", "FactPlan", "SubjectFacts", "facts_section"]

FACT_MEMORY_CATEGORY = "subject_fact"
FACT_IMPORTANCE = 3
_MAX_FACTS = 1000


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """A fact a summary found: its category and one short sentence."""

    category: FactCategory
    content: str


@dataclass(frozen=True, slots=True)
class FactPlan:
    """What storing some extracted facts writes: new memories and revisions of old ones."""

    new: list[dict[str, Any]]
    revisions: list[tuple[Memory, dict[str, Any]]]


def _overlap(a: str, b: str) -> float:
    ta, tb = set(terms(a)), set(terms(b))
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def _fact(memory: Memory) -> SubjectFact:
    raw = memory.metadata.get("fact_category", FactCategory.OTHER.value)
    category = FactCategory(raw) if raw in FactCategory._value2member_map_ else FactCategory.OTHER
    return SubjectFact(
        id=memory.id,
        user_id=memory.user_id,
        subject_id=memory.subject_id or "",
        category=category,
        content=memory.value,
        visibility="shared" if memory.visibility == Visibility.SHARED else "private",
        version=memory.version,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
    )


def _oldest_first(memory: Memory) -> tuple[Any, ...]:
    position = memory.metadata.get("position")
    return (memory.created_at, position if isinstance(position, int) else 0, memory.id)


def facts_section(name: str, facts: Sequence[SubjectFact], *, user_id: str) -> str | None:
    """The prompt section for a subject's facts as ``user_id`` sees them (``None``: none)."""
    if not facts:
        return None
    lines = [f"Known facts about {name} from conversations:"]
    for fact in facts:
        mark = "shared" if fact.visibility == "shared" else "personal"
        lines.append(f"- [{fact.category.value}] {fact.content} ({mark})")
    return "\n".join(lines)


class SubjectFacts:
    """Stores, lists, shares and deletes subject facts through the engine."""

    duplicate: float = 0.8
    contradiction: float = 0.5

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def _own(self, account_id: str, user_id: str, subject_id: str | None) -> list[Memory]:
        flt = MemoryFilter(
            account_id=account_id,
            user_id=user_id,
            categories=(FACT_MEMORY_CATEGORY,),
        )
        found = self.engine.list_memories(flt, limit=_MAX_FACTS)
        return [m for m in found if m.subject_id == subject_id]

    def plan(
        self,
        *,
        account_id: str,
        user_id: str,
        subject_id: str | None,
        facts: Sequence[ExtractedFact],
        conversation_id: str,
    ) -> FactPlan:
        """What storing ``facts`` writes (read before the summary's transaction)."""
        own = self._own(account_id, user_id, subject_id)
        seen: list[tuple[str, FactCategory]] = []
        plan = FactPlan(new=[], revisions=[])
        revised: set[str] = set()
        for fact in facts:
            content = " ".join(fact.content.split())[:500]
            if not content:
                continue
            if any(_overlap(content, s) >= self.duplicate for s, _ in seen):
                continue
            best: Memory | None = None
            best_score = 0.0
            for memory in own:
                score = _overlap(content, memory.value)
                if score > best_score:
                    best, best_score = memory, score
            seen.append((content, fact.category))
            if best is not None and best_score >= self.duplicate:
                continue
            same_category = best is not None and _fact(best).category == fact.category
            if best is not None and same_category and best_score >= self.contradiction:
                if best.id in revised:
                    continue
                revised.add(best.id)
                plan.revisions.append((best, {"value": content}))
                continue
            plan.new.append(
                {
                    "account_id": account_id,
                    "user_id": user_id,
                    "subject_id": subject_id,
                    "key": f"subject_fact.{fact.category.value}.{uuid.uuid4().hex[:12]}",
                    "value": content,
                    "type": MemoryType.FACT,
                    "category": FACT_MEMORY_CATEGORY,
                    "importance": FACT_IMPORTANCE,
                    "source": Source.CONVERSATION,
                    "visibility": Visibility.PRIVATE,
                    "metadata": {
                        "fact_category": fact.category.value,
                        "conversation_id": conversation_id,
                        "position": len(plan.new),  # facts of one summary share a time
                    },
                }
            )
        return plan

    def visible(self, *, account_id: str, user_id: str, subject_id: str) -> list[SubjectFact]:
        """The user's own facts of the subject and everyone's shared ones, oldest first."""
        flt = MemoryFilter(
            account_id=account_id,
            user_id=user_id,
            subject_id=subject_id,
            categories=(FACT_MEMORY_CATEGORY,),
            include_shared=True,
        )
        found = self.engine.list_memories(flt, limit=_MAX_FACTS)
        return [_fact(m) for m in sorted(found, key=_oldest_first)]

    def _owned(self, *, account_id: str, user_id: str, fact_id: str) -> Memory:
        """The fact, if ``user_id`` owns it and it is current; :class:`NotFoundError` else
        (the same answer whether it exists or not)."""
        try:
            memory = self.engine.get(fact_id, account_id=account_id)
        except NotFoundError:
            raise NotFoundError("fact not found") from None
        if (
            memory.user_id != user_id
            or memory.category != FACT_MEMORY_CATEGORY
            or memory.state != MemoryState.ACTIVE
        ):
            raise NotFoundError("fact not found")
        return memory

    def set_visibility(
        self, *, account_id: str, user_id: str, fact_id: str, visibility: Visibility | str
    ) -> SubjectFact:
        """Share or unshare the user's own fact (audited); 404 for anyone else's."""
        self._owned(account_id=account_id, user_id=user_id, fact_id=fact_id)
        changed = self.engine.set_visibility(
            fact_id, Visibility(visibility), account_id=account_id, actor=user_id
        )
        return _fact(changed)

    def delete(self, *, account_id: str, user_id: str, fact_id: str) -> None:
        """Forget the user's own fact (audited; restorable until purged); 404 for others."""
        self._owned(account_id=account_id, user_id=user_id, fact_id=fact_id)
        self.engine.forget(fact_id, account_id=account_id, actor=user_id)
