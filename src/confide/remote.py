"""The remote SDK: the embedded SDK's calls over the REST service (``confide serve``).

:class:`RemoteConfide` (blocking, over ``httpx.Client``) and :class:`AsyncRemoteConfide`
(asyncio, over ``httpx.AsyncClient``) offer what :class:`~confide.client.Confide` offers:
``add``, ``search``, ``query``, ``get``, ``get_all``, ``update``, ``delete``, ``restore``,
``history``, ``export`` and ``erase`` and, on ``engine``, the memory operations ``store``,
``get``, ``list_memories``, ``update``, ``forget``, ``restore`` and ``history``. They return
the same types and raise the same errors: an error answer becomes the class of Confide's
exception tree it names (its ``type``), else the class its status stands for in the tree's own
table (:data:`confide.errors.HTTP_STATUS`), with the service's message; a transport failure is
a :class:`~confide.errors.StorageError`-like :class:`RemoteUnavailableError`.

The two share one request builder (:class:`_Calls`): each call is a :class:`_Request` plus
a parser, sent by a blocking or an async transport. The API key decides the account: a call
naming another account is refused before it is sent, as the service would refuse it. No
memory text ever goes into a URL: texts travel in JSON bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from confide.errors import (
    ConfideError,
    PermissionDeniedError,
    SessionHeldError,
    StorageError,
    ValidationError,
    error_for_http_status,
    error_named,
    http_status_of,
)
from confide.retrieval.memory_query import MemoryQueryRequest, MemoryQueryResult
from confide.retrieval.results import SearchResult
from confide.types import (
    AddResult,
    ErasureReceipt,
    HistoryEvent,
    Memory,
    MemoryFilter,
    MemoryPatch,
    MemoryType,
    NewMemory,
    listing_filter,
    update_patch,
)

__all__ = [
    "AsyncRemoteConfide",
    "AsyncRemoteEngine",
    "RemoteConfide",
    "RemoteEngine",
    "RemoteUnavailableError",
    "error_for_status",
]

_T = TypeVar("_T")
_TIMEOUT = 30.0


class RemoteUnavailableError(StorageError):
    """The Confide service could not be reached (connection refused, timeout)."""


def error_for_status(
    status: int, message: str, body: Mapping[str, Any] | None = None
) -> ConfideError:
    """The Confide error an error answer stands for: the class its ``type`` names (with its
    ``fields`` and ``allowed``), else the class the service maps to ``status``."""
    body = body or {}
    named = body.get("type")
    kind = error_named(named) if isinstance(named, str) else None
    if kind is None or http_status_of(kind) != status:
        kind = error_for_http_status(status)
    if issubclass(kind, ValidationError):
        fields = body.get("fields")
        allowed = body.get("allowed")
        return kind(
            message,
            fields=[str(f) for f in fields] if isinstance(fields, list) else (),
            allowed=(
                {str(k): [str(v) for v in vs] for k, vs in allowed.items() if isinstance(vs, list)}
                if isinstance(allowed, dict)
                else None
            ),
        )
    if issubclass(kind, SessionHeldError):
        worker = body.get("worker")
        return kind(worker if isinstance(worker, dict) else {})
    try:
        return kind(message)
    except TypeError:  # a class that takes other arguments: its status's class says enough
        return error_for_http_status(status)(message)


@dataclass(frozen=True)
class _Request(Generic[_T]):
    method: str
    path: str
    parse: Callable[[Any], _T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def _memory(data: Mapping[str, Any]) -> Memory:
    fields = {k: v for k, v in data.items() if v is not None and k in Memory.model_fields}
    fields["tags"] = tuple(fields.get("tags", ()))
    return Memory.model_validate(fields)


def _added(data: Mapping[str, Any]) -> AddResult:
    fields = {k: v for k, v in data.items() if v is not None and k in AddResult.model_fields}
    fields["tags"] = tuple(fields.get("tags", ()))
    return AddResult.model_validate(fields)


def _type_name(value: object) -> str:
    return type(value).__name__


def _check_add(data: object, key: str | None) -> None:
    """The embedded SDK's TypeErrors, raised before anything is sent."""
    if isinstance(data, str):
        return
    messages: Sequence[object] = data if isinstance(data, Sequence) else ()
    if messages is not data or not all(isinstance(m, Mapping) for m in messages):
        raise TypeError(
            "add() takes a string or a list of messages such as "
            f'[{{"role": "user", "content": "..."}}], not {_type_name(data)}'
        )
    if key is not None:
        raise TypeError("add() takes key= only with a string; extraction picks the keys")
    for message in messages:
        assert isinstance(message, Mapping)
        if not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            raise TypeError('each message needs a string "role" and a string "content"')


class _Calls:
    """Builds each call's request and parser; knows the key's account once asked."""

    def __init__(self) -> None:
        self.account: str | None = None

    def whoami(self) -> _Request[str]:
        return _Request("GET", "/v1/account", lambda d: str(d["account_id"]))

    def account_for(self, requested: str | None) -> str | None:
        """The account to act in; refuses one that is not the key's."""
        if requested is not None and self.account is not None and requested != self.account:
            raise PermissionDeniedError("API key is not valid for this account")
        return requested

    def add(
        self,
        data: str | Sequence[Mapping[str, str]],
        *,
        user_id: str,
        account_id: str | None,
        key: str | None,
        type: MemoryType | str,
    ) -> _Request[list[AddResult]]:
        _check_add(data, key)
        body: dict[str, Any] = {
            "data": data if isinstance(data, str) else [dict(m) for m in data],
            "user_id": user_id,
            "account_id": self.account_for(account_id),
            "key": key,
            "type": MemoryType(type).value,
        }
        return _Request("POST", "/v1/add", lambda d: [_added(m) for m in d["memories"]], json=body)

    def search(
        self,
        query: str,
        *,
        user_id: str,
        account_id: str | None,
        agent: str | None,
        top_k: int,
        threshold: float | None,
    ) -> _Request[list[SearchResult]]:
        if not isinstance(query, str):
            raise TypeError(f"search() takes the question as a string, not {_type_name(query)}")
        body = {
            "query": query,
            "user_id": user_id,
            "account_id": self.account_for(account_id),
            "agent": agent,
            "top_k": top_k,
            "threshold": threshold,
        }

        def parse(d: Any) -> list[SearchResult]:
            return [
                SearchResult(
                    memory=_memory(r["memory"]), score=r["score"], similarity=r["similarity"]
                )
                for r in d["results"]
            ]

        return _Request("POST", "/v1/search", parse, json=body)

    def query(self, request: MemoryQueryRequest | Mapping[str, Any]) -> _Request[MemoryQueryResult]:
        if not isinstance(request, MemoryQueryRequest | Mapping):
            raise TypeError(
                "query() takes a MemoryQueryRequest or a dict of its fields, such as "
                '{"agent": "default", "account_id": ..., "user_id": ..., "query": ...}, '
                f"not {_type_name(request)}; for a plain question use "
                "search(question, user_id=...)"
            )
        fields = (
            request.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(request, MemoryQueryRequest)
            else dict(request)
        )
        self.account_for(fields.pop("account_id", None))
        filters = fields.get("filters")
        if isinstance(filters, Mapping):
            fields["filters"] = {k: v for k, v in filters.items() if v not in (None, [], ())}
        return _Request(
            "POST",
            "/v1/memory_query",
            lambda d: MemoryQueryResult(
                header=d.get("header", ""), results=d["results"], tokens=d["tokens"]
            ),
            json=fields,
        )

    # ---- engine operations ------------------------------------------------------------------
    def store(self, new: NewMemory | Mapping[str, Any]) -> _Request[Memory]:
        if not isinstance(new, NewMemory | Mapping):
            raise TypeError(f"expected a NewMemory or a mapping, not {_type_name(new)}")
        memory = new if isinstance(new, NewMemory) else NewMemory.model_validate(dict(new))
        self.account_for(memory.account_id)
        body = memory.model_dump(
            mode="json",
            include={"user_id", "key", "value", "type", "confidence", "importance", "visibility"},
        )
        body["tags"] = list(memory.tags)
        return _Request("POST", "/v1/memories", _memory, json=body)

    def get(self, memory_id: str, *, account_id: str | None) -> _Request[Memory]:
        self.account_for(account_id)
        return _Request("GET", f"/v1/memories/{_segment(memory_id)}", _memory)

    def list_memories(
        self, flt: MemoryFilter, *, limit: int, offset: int
    ) -> _Request[list[Memory]]:
        self.account_for(flt.account_id)
        if flt.user_id is None:
            raise ValidationError("list_memories over REST needs a user_id filter")
        params = {"user_id": flt.user_id, "limit": limit, "offset": offset}
        return _Request(
            "GET", "/v1/memories", lambda d: [_memory(m) for m in d["memories"]], params=params
        )

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch | Mapping[str, Any],
        *,
        account_id: str,
        expected_row_version: int | None,
    ) -> _Request[Memory]:
        self.account_for(account_id)
        fields = patch if isinstance(patch, MemoryPatch) else MemoryPatch.model_validate(patch)
        body = fields.model_dump(
            mode="json",
            exclude_none=True,
            include={"value", "type", "confidence", "importance", "visibility", "tags"},
        )
        headers = {} if expected_row_version is None else {"If-Match": f'"{expected_row_version}"'}
        return _Request(
            "PATCH", f"/v1/memories/{_segment(memory_id)}", _memory, json=body, headers=headers
        )

    def forget(self, memory_id: str, *, account_id: str | None) -> _Request[Memory]:
        self.account_for(account_id)
        return _Request("DELETE", f"/v1/memories/{_segment(memory_id)}", _memory)

    def restore(self, memory_id: str, *, account_id: str | None) -> _Request[Memory]:
        self.account_for(account_id)
        return _Request("POST", f"/v1/memories/{_segment(memory_id)}/restore", _memory)

    def current(self, memory_id: str, *, account_id: str | None) -> _Request[Memory]:
        self.account_for(account_id)
        return _Request("GET", f"/v1/memories/{_segment(memory_id)}/current", _memory)

    def get_all(
        self,
        *,
        user_id: str,
        account_id: str | None,
        filters: Mapping[str, Any] | None,
        limit: int,
        offset: int,
        include_forgotten: bool,
    ) -> _Request[list[Memory]]:
        account = self.account_for(account_id) or self.account or ""
        flt = listing_filter(
            account_id=account,
            user_id=user_id,
            filters=filters,
            include_forgotten=include_forgotten,
        )
        params: dict[str, Any] = {"user_id": user_id, "limit": limit, "offset": offset}
        if include_forgotten:
            params["include_forgotten"] = "true"
        if flt.types:
            params["type"] = [t.value for t in flt.types]
        if flt.categories:
            params["category"] = list(flt.categories)
        if flt.agent_id is not None:
            params["agent_id"] = flt.agent_id
        if flt.run_id is not None:
            params["run_id"] = flt.run_id
        return _Request(
            "GET", "/v1/memories", lambda d: [_memory(m) for m in d["memories"]], params=params
        )

    def patch(self, memory_id: str, data: Any, *, account_id: str | None) -> _Request[Memory]:
        """``PATCH`` of exactly this version (the SDK's ``update`` finds the current one)."""
        self.account_for(account_id)
        fields = update_patch(data)
        body = MemoryPatch.model_validate(fields).model_dump(
            mode="json", exclude_none=True, include=set(fields)
        )
        return _Request("PATCH", f"/v1/memories/{_segment(memory_id)}", _memory, json=body)

    def export(self, *, user_id: str, account_id: str | None) -> _Request[dict[str, Any]]:
        self.account_for(account_id)
        return _Request("GET", f"/v1/users/{_segment(user_id)}/export", dict)

    def erase(self, *, user_id: str, account_id: str | None) -> _Request[ErasureReceipt]:
        self.account_for(account_id)
        return _Request("DELETE", f"/v1/users/{_segment(user_id)}", ErasureReceipt.model_validate)

    def history(self, memory_id: str, *, account_id: str | None) -> _Request[list[HistoryEvent]]:
        self.account_for(account_id)

        def parse(d: Any) -> list[HistoryEvent]:
            return [
                HistoryEvent.model_validate({"id": n, "lineage_id": "", **e})
                for n, e in enumerate(d["history"])
            ]

        return _Request("GET", f"/v1/memories/{_segment(memory_id)}/history", parse)


def _segment(memory_id: str) -> str:
    """A memory id as one path segment (ids are uuids; anything else cannot match one)."""
    if not isinstance(memory_id, str) or not memory_id or "/" in memory_id:
        raise ValidationError("memory_id must be a non-empty id")
    return quote(memory_id, safe="")


def _result(request: _Request[_T], response: httpx.Response) -> _T:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {}
        message = str(body.get("error", response.reason_phrase))
        raise error_for_status(response.status_code, message, body)
    return request.parse(response.json())


def _headers(api_key: str) -> dict[str, str]:
    if not isinstance(api_key, str) or not api_key.strip():
        raise ValidationError("an API key is required (confide keys create)")
    return {"Authorization": f"Bearer {api_key}"}


class RemoteEngine:
    """The memory operations of :class:`~confide.engine.MemoryEngine`, over REST (blocking)."""

    def __init__(self, remote: RemoteConfide) -> None:
        self._remote = remote

    def store(self, new: NewMemory | Mapping[str, Any], *, actor: str | None = None) -> Memory:
        """Store a memory (``actor`` is the service's: ``api``)."""
        return self._remote._send(lambda c: c.store(new))

    def get(self, memory_id: str, *, account_id: str) -> Memory:
        """One memory version. Raises :class:`NotFoundError`."""
        return self._remote._send(lambda c: c.get(memory_id, account_id=account_id))

    def list_memories(
        self, flt: MemoryFilter, *, limit: int = 100, offset: int = 0
    ) -> list[Memory]:
        """A user's active memories, newest first (``flt.user_id`` is required)."""
        return self._remote._send(lambda c: c.list_memories(flt, limit=limit, offset=offset))

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch | Mapping[str, Any],
        *,
        account_id: str,
        actor: str | None = None,
        expected_row_version: int | None = None,
    ) -> Memory:
        """Write a new version. Raises :class:`ConflictError` / :class:`PreconditionFailedError`."""
        return self._remote._send(
            lambda c: c.update(
                memory_id, patch, account_id=account_id, expected_row_version=expected_row_version
            )
        )

    def forget(self, memory_id: str, *, account_id: str, actor: str | None = None) -> Memory:
        """Soft-delete a memory."""
        return self._remote._send(lambda c: c.forget(memory_id, account_id=account_id))

    def restore(self, memory_id: str, *, account_id: str, actor: str | None = None) -> Memory:
        """Bring a forgotten memory back. Raises :class:`ConflictError` for an active one."""
        return self._remote._send(lambda c: c.restore(memory_id, account_id=account_id))

    def history(self, memory_id: str, *, account_id: str) -> list[HistoryEvent]:
        """Audit events of every version, newest first (no values)."""
        return self._remote._send(lambda c: c.history(memory_id, account_id=account_id))


class RemoteConfide:
    """:class:`~confide.client.Confide`'s calls against a running ``confide serve`` (blocking).

    Args:
        url: the service's base URL, e.g. ``http://127.0.0.1:8000``.
        api_key: a bearer key from ``confide keys create``; its account is the one acted in.
        timeout: seconds per request.
        transport: an ``httpx`` transport (tests may pass an in-process one).
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = _TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=url, headers=_headers(api_key), timeout=timeout, transport=transport
        )
        self._calls = _Calls()
        self.engine = RemoteEngine(self)

    @property
    def account_id(self) -> str:
        """The API key's account."""
        if self._calls.account is None:
            self._calls.account = self._call(self._calls.whoami())
        return self._calls.account

    def _call(self, request: _Request[_T]) -> _T:
        try:
            response = self._http.request(
                request.method,
                request.path,
                json=request.json,
                params=request.params or None,
                headers=request.headers or None,
            )
        except httpx.TransportError as exc:
            raise RemoteUnavailableError(
                f"Confide service unreachable ({type(exc).__name__})"
            ) from None
        return _result(request, response)

    def _send(self, build: Callable[[_Calls], _Request[_T]]) -> _T:
        _ = self.account_id  # the key's account, to refuse a call naming another
        return self._call(build(self._calls))

    def add(
        self,
        data: str | Sequence[Mapping[str, str]],
        *,
        user_id: str,
        account_id: str | None = None,
        key: str | None = None,
        type: MemoryType | str = MemoryType.FACT,
    ) -> list[AddResult]:
        """Remember a text or a conversation (see :meth:`Confide.add`) in the key's account."""
        return self._send(
            lambda c: c.add(data, user_id=user_id, account_id=account_id, key=key, type=type)
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        account_id: str | None = None,
        agent: str | None = None,
        top_k: int = 5,
        threshold: float | None = None,
    ) -> list[SearchResult]:
        """The user's memories ranked by relevance (see :meth:`Confide.search`)."""
        return self._send(
            lambda c: c.search(
                query,
                user_id=user_id,
                account_id=account_id,
                agent=agent,
                top_k=top_k,
                threshold=threshold,
            )
        )

    def query(self, request: MemoryQueryRequest | Mapping[str, Any]) -> MemoryQueryResult:
        """Answer a ``memory_query`` request (see :meth:`Confide.query`)."""
        return self._send(lambda c: c.query(request))

    def get(self, memory_id: str, *, account_id: str | None = None) -> Memory:
        """The memory ``memory_id`` names, as it is now (any id it has had; see
        :meth:`Confide.get`)."""
        return self._send(lambda c: c.current(memory_id, account_id=account_id))

    def get_all(
        self,
        *,
        user_id: str,
        account_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_forgotten: bool = False,
    ) -> list[Memory]:
        """The user's memories, newest first, a page at a time (see :meth:`Confide.get_all`)."""
        return self._send(
            lambda c: c.get_all(
                user_id=user_id,
                account_id=account_id,
                filters=filters,
                limit=limit,
                offset=offset,
                include_forgotten=include_forgotten,
            )
        )

    def update(
        self,
        memory_id: str,
        data: str | MemoryPatch | Mapping[str, Any],
        *,
        account_id: str | None = None,
    ) -> Memory:
        """Change a memory (any id it has had): its current version is read, then patched;
        the new version is returned (see :meth:`Confide.update`)."""
        current = self._send(lambda c: c.current(memory_id, account_id=account_id))
        return self._send(lambda c: c.patch(current.id, data, account_id=account_id))

    def delete(self, memory_id: str, *, account_id: str | None = None) -> Memory:
        """Forget a memory, restorable (see :meth:`Confide.delete`)."""
        return self._send(lambda c: c.forget(memory_id, account_id=account_id))

    def restore(self, memory_id: str, *, account_id: str | None = None) -> Memory:
        """Bring a forgotten memory back (see :meth:`Confide.restore`)."""
        return self._send(lambda c: c.restore(memory_id, account_id=account_id))

    def history(self, memory_id: str, *, account_id: str | None = None) -> list[HistoryEvent]:
        """What happened to a memory, newest first (see :meth:`Confide.history`)."""
        return self._send(lambda c: c.history(memory_id, account_id=account_id))

    def export(self, *, user_id: str, account_id: str | None = None) -> dict[str, Any]:
        """Everything the user owns, decrypted (see :meth:`Confide.export`)."""
        return self._send(lambda c: c.export(user_id=user_id, account_id=account_id))

    def erase(self, *, user_id: str, account_id: str | None = None) -> ErasureReceipt:
        """Erase the user for good (an admin key; see :meth:`Confide.erase`)."""
        return self._send(lambda c: c.erase(user_id=user_id, account_id=account_id))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> RemoteConfide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRemoteEngine:
    """The memory operations over REST, for asyncio callers."""

    def __init__(self, remote: AsyncRemoteConfide) -> None:
        self._remote = remote

    async def store(
        self, new: NewMemory | Mapping[str, Any], *, actor: str | None = None
    ) -> Memory:
        """Store a memory."""
        return await self._remote._send(lambda c: c.store(new))

    async def get(self, memory_id: str, *, account_id: str) -> Memory:
        """One memory version. Raises :class:`NotFoundError`."""
        return await self._remote._send(lambda c: c.get(memory_id, account_id=account_id))

    async def list_memories(
        self, flt: MemoryFilter, *, limit: int = 100, offset: int = 0
    ) -> list[Memory]:
        """A user's active memories, newest first."""
        return await self._remote._send(lambda c: c.list_memories(flt, limit=limit, offset=offset))

    async def update(
        self,
        memory_id: str,
        patch: MemoryPatch | Mapping[str, Any],
        *,
        account_id: str,
        actor: str | None = None,
        expected_row_version: int | None = None,
    ) -> Memory:
        """Write a new version."""
        return await self._remote._send(
            lambda c: c.update(
                memory_id, patch, account_id=account_id, expected_row_version=expected_row_version
            )
        )

    async def forget(self, memory_id: str, *, account_id: str, actor: str | None = None) -> Memory:
        """Soft-delete a memory."""
        return await self._remote._send(lambda c: c.forget(memory_id, account_id=account_id))

    async def restore(self, memory_id: str, *, account_id: str, actor: str | None = None) -> Memory:
        """Bring a forgotten memory back."""
        return await self._remote._send(lambda c: c.restore(memory_id, account_id=account_id))

    async def history(self, memory_id: str, *, account_id: str) -> list[HistoryEvent]:
        """Audit events of every version, newest first (no values)."""
        return await self._remote._send(lambda c: c.history(memory_id, account_id=account_id))


class AsyncRemoteConfide:
    """:class:`RemoteConfide` for asyncio callers: the same calls, awaited."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = _TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=url, headers=_headers(api_key), timeout=timeout, transport=transport
        )
        self._calls = _Calls()
        self.engine = AsyncRemoteEngine(self)

    async def account_id(self) -> str:
        """The API key's account."""
        if self._calls.account is None:
            self._calls.account = await self._call(self._calls.whoami())
        return self._calls.account

    async def _call(self, request: _Request[_T]) -> _T:
        try:
            response = await self._http.request(
                request.method,
                request.path,
                json=request.json,
                params=request.params or None,
                headers=request.headers or None,
            )
        except httpx.TransportError as exc:
            raise RemoteUnavailableError(
                f"Confide service unreachable ({type(exc).__name__})"
            ) from None
        return _result(request, response)

    async def _send(self, build: Callable[[_Calls], _Request[_T]]) -> _T:
        await self.account_id()
        return await self._call(build(self._calls))

    async def add(
        self,
        data: str | Sequence[Mapping[str, str]],
        *,
        user_id: str,
        account_id: str | None = None,
        key: str | None = None,
        type: MemoryType | str = MemoryType.FACT,
    ) -> list[AddResult]:
        """Remember a text or a conversation (see :meth:`Confide.add`)."""
        return await self._send(
            lambda c: c.add(data, user_id=user_id, account_id=account_id, key=key, type=type)
        )

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        account_id: str | None = None,
        agent: str | None = None,
        top_k: int = 5,
        threshold: float | None = None,
    ) -> list[SearchResult]:
        """The user's memories ranked by relevance (see :meth:`Confide.search`)."""
        return await self._send(
            lambda c: c.search(
                query,
                user_id=user_id,
                account_id=account_id,
                agent=agent,
                top_k=top_k,
                threshold=threshold,
            )
        )

    async def query(self, request: MemoryQueryRequest | Mapping[str, Any]) -> MemoryQueryResult:
        """Answer a ``memory_query`` request (see :meth:`Confide.query`)."""
        return await self._send(lambda c: c.query(request))

    async def get(self, memory_id: str, *, account_id: str | None = None) -> Memory:
        """The memory ``memory_id`` names, as it is now (any id it has had; see
        :meth:`Confide.get`)."""
        return await self._send(lambda c: c.current(memory_id, account_id=account_id))

    async def get_all(
        self,
        *,
        user_id: str,
        account_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_forgotten: bool = False,
    ) -> list[Memory]:
        """The user's memories, newest first, a page at a time (see :meth:`Confide.get_all`)."""
        return await self._send(
            lambda c: c.get_all(
                user_id=user_id,
                account_id=account_id,
                filters=filters,
                limit=limit,
                offset=offset,
                include_forgotten=include_forgotten,
            )
        )

    async def update(
        self,
        memory_id: str,
        data: str | MemoryPatch | Mapping[str, Any],
        *,
        account_id: str | None = None,
    ) -> Memory:
        """Change a memory (any id it has had): its current version is read, then patched;
        the new version is returned (see :meth:`Confide.update`)."""
        current = await self._send(lambda c: c.current(memory_id, account_id=account_id))
        return await self._send(lambda c: c.patch(current.id, data, account_id=account_id))

    async def delete(self, memory_id: str, *, account_id: str | None = None) -> Memory:
        """Forget a memory, restorable (see :meth:`Confide.delete`)."""
        return await self._send(lambda c: c.forget(memory_id, account_id=account_id))

    async def restore(self, memory_id: str, *, account_id: str | None = None) -> Memory:
        """Bring a forgotten memory back (see :meth:`Confide.restore`)."""
        return await self._send(lambda c: c.restore(memory_id, account_id=account_id))

    async def history(self, memory_id: str, *, account_id: str | None = None) -> list[HistoryEvent]:
        """What happened to a memory, newest first (see :meth:`Confide.history`)."""
        return await self._send(lambda c: c.history(memory_id, account_id=account_id))

    async def export(self, *, user_id: str, account_id: str | None = None) -> dict[str, Any]:
        """Everything the user owns, decrypted (see :meth:`Confide.export`)."""
        return await self._send(lambda c: c.export(user_id=user_id, account_id=account_id))

    async def erase(self, *, user_id: str, account_id: str | None = None) -> ErasureReceipt:
        """Erase the user for good (an admin key; see :meth:`Confide.erase`)."""
        return await self._send(lambda c: c.erase(user_id=user_id, account_id=account_id))

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRemoteConfide:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
