"""The one place where errors become HTTP answers.

Every error answer has the voice bridge's shape ``{"success": false, "error": message}``.
Engram's exception tree maps to status codes here; request-validation errors (malformed
JSON, wrong field types) are 400; anything unexpected is a 500 with no detail.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engram.errors import (
    ConfigurationError,
    ConflictError,
    EmbedderMismatchError,
    EngramError,
    IndexerMissingError,
    IntegrityError,
    KeyUnavailableError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    ProviderError,
    StorageError,
    ValidationError,
)

__all__ = ["STATUS_BY_ERROR", "ApiError", "error_body", "install_error_handlers", "status_for"]

log = logging.getLogger(__name__)

STATUS_BY_ERROR: tuple[tuple[type[EngramError], int], ...] = (
    (ValidationError, 400),
    (NotFoundError, 404),
    (PermissionDeniedError, 403),
    (PreconditionFailedError, 412),  # before its base class: the first match wins
    (ConflictError, 409),
    (EmbedderMismatchError, 409),
    (IndexerMissingError, 409),  # before ConfigurationError: the message says what to do
    (KeyUnavailableError, 503),
    (IntegrityError, 500),
    (StorageError, 503),
    (ProviderError, 502),
    (ConfigurationError, 500),
)


class ApiError(Exception):
    """An HTTP error raised by a route: a status and a client-safe message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_for(exc: EngramError) -> int:
    """The HTTP status of an Engram error."""
    for kind, status in STATUS_BY_ERROR:
        if isinstance(exc, kind):
            return status
    return 500


def error_body(message: str) -> dict[str, object]:
    """The JSON body of an error answer."""
    return {"success": False, "error": message}


def _describe(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return "Malformed JSON body"
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(problems)


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping on ``app``."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.message), status_code=exc.status)

    @app.exception_handler(EngramError)
    async def _engram(request: Request, exc: EngramError) -> JSONResponse:
        status = status_for(exc)
        if status >= 500:
            log.error("request failed: %s", type(exc).__name__)
            message = "Internal error" if status == 500 else "Service unavailable"
            if status == 502:
                message = "Upstream provider failed"
            return JSONResponse(error_body(message), status_code=status)
        return JSONResponse(error_body(str(exc)), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body(_describe(exc)), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(exc.detail)), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error: %s", type(exc).__name__)
        return JSONResponse(error_body("Internal error"), status_code=500)
