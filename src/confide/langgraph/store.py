"""``ConfideStore``: a LangGraph ``BaseStore`` over Confide's memories.

LangGraph and LangMem agents keep long-term memory in a store of JSON items under
namespaces. Here each item is an Confide memory of the store's account:

- the namespace's first element is the **user** (``("ann",)``, ``("ann", "notes")``); its
  second, when present, is the memory's **agent** (``agent_id``); the full namespace and the
  item's key are kept in the memory's sealed metadata, so any key or depth round-trips;
- the item's value (a dict) is the memory's value as JSON, sealed under the user's key like
  every memory, versioned, audited and erasable with the user;
- ``search`` with a ``query`` runs Confide's hybrid retrieval (vectors, blind BM25, relation
  edges) for the user, then keeps the items under the namespace prefix that match ``filter``;
  without a query it lists the user's memories newest first;
- the user's other memories (stored by tools, extraction or the SDK) appear under the
  namespace ``(user_id,)`` with their own key and ``{"content": value, "type": type}``.

The store acts for a :class:`~confide.gate.Principal` (a ``service`` one of its account, bound
to its ``agent``, by default) and every operation passes the gate (:mod:`confide.gate`):
reads (``get``, ``search``, ``list_namespaces``) carry only the categories of the agent's
allowlist (an item of another category is not found); a ``read`` principal writes nothing
(:class:`~confide.errors.PermissionDeniedError`); a pinned principal reaches its user only;
an app's memories (namespace ``("app:<app_id>",)``) are an ``admin``'s only.

A namespace always starts with the user: an operation without one is refused
(:class:`~confide.errors.ValidationError`). TTLs are not supported. The engine is synchronous;
``abatch`` runs ``batch`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from confide.client import Confide
from confide.errors import ValidationError
from confide.gate import Gate, Principal, require_write
from confide.langgraph._principal import door_principal
from confide.types import Memory, MemoryType

__all__ = ["ConfideStore"]

_NS = "lg_namespace"
_KEY = "lg_key"
_MAX_LIST = 1000


def _memory_key(namespace: tuple[str, ...], key: str) -> str:
    """The Confide key of an item: stable, valid whatever the namespace and key hold."""
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()
    return f"lg.{digest[:40]}"


def _user(namespace: tuple[str, ...]) -> str:
    if not namespace or not namespace[0] or namespace[0] == "*":
        raise ValidationError("an ConfideStore namespace starts with the user id, e.g. ('ann',)")
    return namespace[0]


class ConfideStore(BaseStore):
    """A LangGraph store whose items are Confide memories of one account.

    Args:
        confide: the SDK (engine, embedder, hybrid retrieval, categories and allowlists).
        account_id: the account every item belongs to (optional with a ``principal``).
        agent: the agent whose category allowlist every read carries (default: the
            principal's first agent, ``default`` for one bound to none).
        principal: who the store acts for (default: a ``service`` principal of
            ``account_id``, bound to ``agent``).

    Raises:
        ValidationError: no account, or a principal of another account.
        PermissionDeniedError: an ``agent`` the principal is not bound to.
    """

    supports_ttl = False

    def __init__(
        self,
        confide: Confide,
        *,
        account_id: str | None = None,
        agent: str | None = None,
        principal: Principal | None = None,
    ) -> None:
        self.principal, named = door_principal(account_id, principal, agent)
        self.confide = confide
        self.account_id = self.principal.account_id
        self.agent = named or self.principal.agent_for(None)
        self.gate: Gate = confide.components.gate

    # ---- mapping ------------------------------------------------------------------------------
    def _item(self, memory: Memory, score: float | None = None) -> SearchItem:
        namespace = memory.metadata.get(_NS)
        if isinstance(namespace, list):
            key = str(memory.metadata.get(_KEY))
            try:
                value = json.loads(memory.value)
            except ValueError:
                value = {"content": memory.value}
            ns = tuple(str(p) for p in namespace)
        else:
            key, ns = memory.key, (memory.user_id,)
            value = {"content": memory.value, "type": memory.type.value}
        return SearchItem(
            namespace=ns,
            key=key,
            value=value if isinstance(value, dict) else {"content": value},
            created_at=memory.created_at,
            updated_at=memory.updated_at,
            score=score,
        )

    def _by_key(self, user: str, key: str) -> Memory | None:
        return self.gate.memory_by_key(self.principal, user_id=user, key=key, agent=self.agent)

    def _find(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        """The item's memory, when the store's agent may read it."""
        user = _user(namespace)
        found = self._by_key(user, _memory_key(namespace, key))
        if found is None and len(namespace) == 1:
            try:
                native = self._by_key(user, key)
            except ValueError:
                native = None
            if native is not None and _NS not in native.metadata:
                return native
        return found

    def _listed(self, user: str) -> list[Memory]:
        return self.gate.memories_for(
            self.principal, user_id=user, agent=self.agent, limit=_MAX_LIST
        )

    @staticmethod
    def _matches(item: Item, prefix: tuple[str, ...], flt: dict[str, Any] | None) -> bool:
        if item.namespace[: len(prefix)] != prefix:
            return False
        return not flt or all(item.value.get(k) == v for k, v in flt.items())

    # ---- operations ---------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        memory = self._find(tuple(op.namespace), op.key)
        if memory is None:
            return None
        item = self._item(memory)
        return Item(
            namespace=item.namespace,
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _put(self, op: PutOp) -> None:
        require_write(self.principal, "writing to the LangGraph store")
        namespace = tuple(op.namespace)
        user = _user(namespace)
        current = self._find(namespace, op.key)
        gate, principal = self.gate, self.principal
        if op.value is None:
            if current is not None:
                gate.forget(principal, current.id, actor="langgraph")
            return
        text = json.dumps(dict(op.value), ensure_ascii=False, sort_keys=True)
        metadata = {_NS: list(namespace), _KEY: op.key}
        if current is not None and _NS in current.metadata:
            gate.update(
                principal, current.id, {"value": text, "metadata": metadata}, actor="langgraph"
            )
            return
        gate.store(
            principal,
            {
                "user_id": user,
                # An app's owner stores in that app's scope (an admin's only, as the gate says).
                "app_id": gate.agent_view(principal, user_id=user, agent=self.agent).app_id,
                "agent_id": namespace[1] if len(namespace) > 1 else None,
                "key": _memory_key(namespace, op.key),
                "value": text,
                "type": MemoryType.FACT,
                "metadata": metadata,
            },
            actor="langgraph",
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        user = _user(prefix)
        wanted = op.offset + op.limit
        if op.query:
            view = self.gate.agent_view(self.principal, user_id=user, agent=self.agent)
            ranked = self.confide.memory_query.rank(
                {
                    "agent": self.agent,
                    "account_id": view.account_id,
                    "user_id": view.user_id,
                    "query": op.query,
                    "top_k": min(50, max(wanted * 3, 10)),
                    "categories": view.categories,
                }
            )
            items = [self._item(m, float(extra["score"])) for m, extra in ranked]
        else:
            items = [self._item(m) for m in self._listed(user)]
        kept = [i for i in items if self._matches(i, prefix, op.filter)]
        return kept[op.offset : wanted]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        prefixes = [c.path for c in conditions if c.match_type == "prefix"]
        if not prefixes:
            raise ValidationError("list_namespaces needs a prefix that starts with the user id")
        user = _user(tuple(str(p) for p in prefixes[0]))
        found: set[tuple[str, ...]] = set()
        for memory in self._listed(user):
            namespace = self._item(memory).namespace
            if all(_condition(namespace, c.match_type, c.path) for c in conditions):
                found.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(found)[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run get, put, search and list-namespaces operations in order."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise ValidationError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))


def _condition(namespace: tuple[str, ...], match_type: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))
