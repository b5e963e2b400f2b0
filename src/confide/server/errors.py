"""The one place where errors become HTTP answers.

Every error answer has the voice bridge's shape ``{"success": false, "error": message}``;
a client mistake about particular fields adds ``"fields"`` (their names as the request spells
them) and, for a field with a fixed set of values, ``"allowed"`` (field name to the values it
takes). Confide's exception tree maps to status codes here; request-validation errors
(malformed JSON, wrong field types) are 400; anything unexpected is a 500 with no detail.
"""

from __future__ import annotations

import logging
import re
import types
import typing
from collections.abc import Mapping, Sequence
from enum import Enum

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from confide.errors import (
    HTTP_STATUS,
    ConfideError,
    SessionHeldError,
    ValidationError,
    error_answer,
    error_for_http_status,
    http_status,
)

__all__ = [
    "STATUS_BY_ERROR",
    "ApiError",
    "allowed_values",
    "error_body",
    "held_body",
    "install_error_handlers",
    "status_for",
]

log = logging.getLogger(__name__)

STATUS_BY_ERROR = HTTP_STATUS
"""Confide's exception tree by HTTP status (:data:`confide.errors.HTTP_STATUS`)."""


class ApiError(Exception):
    """An HTTP error raised by a route: a status and a client-safe message.

    ``fields`` names the request fields at fault (as the request spells them); ``allowed``
    gives the values a field with a fixed set of values takes.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        fields: Sequence[str] = (),
        allowed: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = tuple(fields)
        self.allowed = dict(allowed or {})


def kind_for_status(status: int) -> str | None:
    """The class of :mod:`confide.errors` a route's own client error stands for (none for
    5xx answers, which never say why, or a status the tree has no class for)."""
    kind = error_for_http_status(status)
    return None if status >= 500 or kind is ConfideError else kind.__name__


def status_for(exc: ConfideError) -> int:
    """The HTTP status of a Confide error."""
    return http_status(exc)


def error_body(
    message: str,
    *,
    fields: Sequence[str] = (),
    allowed: Mapping[str, Sequence[str]] | None = None,
    kind: str | None = None,
) -> dict[str, object]:
    """The JSON body of an error answer (``fields``, ``allowed`` and the error's ``type``, the
    class of :mod:`confide.errors` it is, only when given)."""
    body: dict[str, object] = {"success": False, "error": message}
    if kind is not None:
        body["type"] = kind
    if fields:
        body["fields"] = list(fields)
    if allowed:
        body["allowed"] = {name: list(values) for name, values in allowed.items()}
    return body


def held_body(exc: SessionHeldError) -> dict[str, object]:
    """The 409 body of a call session another process holds, naming that process."""
    return {**error_body(str(exc), kind=type(exc).__name__), "worker": exc.worker}


def allowed_values(annotation: object) -> list[str] | None:
    """The values an enum or ``Literal`` annotation (optional or not) admits, else ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return [str(value) for value in typing.get_args(annotation)]
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            values = allowed_values(arg)
            if values is not None:
                return values
    return None


_QUOTED = re.compile(r"'([^']*)'")
_CHOICE_ERRORS = frozenset({"enum", "literal_error"})


def _describe(exc: RequestValidationError, content_type: str) -> dict[str, object]:
    if "json" not in content_type.lower() and any(
        tuple(err.get("loc", ())) == ("body",) for err in exc.errors()
    ):
        # The body was not read as JSON at all: say what to send, not how it failed.
        return error_body(
            "Send the body as JSON, with the header Content-Type: application/json",
            fields=["body"],
            kind=ValidationError.__name__,
        )
    problems = []
    fields: list[str] = []
    allowed: dict[str, list[str]] = {}
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return error_body("Malformed JSON body", kind=ValidationError.__name__)
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
        if loc and loc not in fields:
            fields.append(loc)
        expected = (err.get("ctx") or {}).get("expected")
        if loc and err.get("type") in _CHOICE_ERRORS and isinstance(expected, str):
            allowed[loc] = _QUOTED.findall(expected)
    return error_body(
        "Invalid request: " + "; ".join(problems),
        fields=fields,
        allowed=allowed,
        kind=ValidationError.__name__,
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping on ``app``."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(
                exc.message,
                fields=exc.fields,
                allowed=exc.allowed,
                kind=kind_for_status(exc.status),
            ),
            status_code=exc.status,
        )

    @app.exception_handler(ConfideError)
    async def _confide(request: Request, exc: ConfideError) -> JSONResponse:
        status = status_for(exc)
        if status >= 500:
            log.error("request failed: %s", type(exc).__name__)
            message = "Internal error" if status == 500 else "Service unavailable"
            if status == 502:
                message = "Upstream provider failed"
            return JSONResponse(error_body(message), status_code=status)
        if isinstance(exc, SessionHeldError):
            return JSONResponse(held_body(exc), status_code=status)
        # The answer every door gives (the Realtime tool output is the same object).
        return JSONResponse(error_answer(exc), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            _describe(exc, request.headers.get("content-type", "")), status_code=400
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(exc.detail), kind=kind_for_status(exc.status_code)),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error: %s", type(exc).__name__)
        return JSONResponse(error_body("Internal error"), status_code=500)
