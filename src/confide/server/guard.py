"""What every request body must be before a route sees it: bounded, UTF-8, sane JSON.

An ASGI middleware, so a 100 MB body is refused while it arrives (413, naming the limit)
instead of being read, parsed and written; and a JSON body whose strings hold lone
surrogates or NUL characters, or whose nesting is deeper than any route needs, is refused
with a 400 that says which, instead of failing deep inside (a surrogate cannot be encoded
for the database; deep nesting exhausts the parser's recursion).

Written here rather than taken from a library: Starlette has no body limit, and the checks
are a few lines over the standard ``json`` module.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote_to_bytes

from confide.server.errors import kind_for_status

__all__ = ["MAX_JSON_DEPTH", "RequestGuard", "json_problem", "url_problem"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_JSON_DEPTH = 32
"""No route takes JSON nested deeper than this (the deepest, ``memory_query``, needs 3)."""


def json_problem(value: object) -> str | None:
    """What makes a decoded JSON value unusable, or ``None``: a lone surrogate or a NUL in
    a string (keys included), or nesting deeper than :data:`MAX_JSON_DEPTH`."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "a string holds a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                return f"JSON is nested deeper than {MAX_JSON_DEPTH} levels"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


class RequestGuard:
    """Refuses bodies over ``max_body_bytes`` (413), unusable JSON bodies and URLs holding a
    NUL character (400).

    Args:
        app: the ASGI application behind the guard.
        max_body_bytes: the largest body accepted (``CONFIDE_MAX_BODY_BYTES``).
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an HTTP request's body, then hand it on (replayed) or answer the refusal."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = url_problem(scope)
        if problem is not None:
            await self._refuse(send, 400, f"Invalid request URL: {problem}")
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(send, 413, self._too_large())
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(send, 413, self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = _body_problem(scope, body) if body else None
        if problem is not None:
            await self._refuse(send, 400, f"Invalid request body: {problem}")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return (
            f"Request body too large: the limit is {self.max_body_bytes} bytes "
            "(CONFIDE_MAX_BODY_BYTES)"
        )

    @staticmethod
    async def _refuse(send: Send, status: int, error: str) -> None:
        payload = json.dumps(
            {"success": False, "error": error, "type": kind_for_status(status)}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def url_problem(scope: Scope) -> str | None:
    """What makes a request's URL unusable, or ``None``: a NUL character in its path or its
    query string (PostgreSQL refuses NUL in text, so an id holding one would fail deep in a
    route instead of being refused as the client mistake it is)."""
    if "\x00" in scope.get("path", ""):
        return "the path holds a NUL character"
    query = bytes(scope.get("query_string", b""))
    if b"\x00" in unquote_to_bytes(query.replace(b"+", b" ")):
        return "the query string holds a NUL character"
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _body_problem(scope: Scope, body: bytes) -> str | None:
    content_type = next(
        (v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"content-type"), ""
    )
    if "json" not in content_type.lower():
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not valid UTF-8"
    # Only an escape can make a lone surrogate or a NUL inside a JSON string, and nesting
    # needs brackets: a body with neither is left to the route's one parse (the hot path).
    if "\\u" not in text and text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    try:
        value = json.loads(text)
    except RecursionError:
        return f"JSON is nested deeper than {MAX_JSON_DEPTH} levels"
    except ValueError:
        return None  # malformed JSON: the route's own parser names the problem
    return json_problem(value)
