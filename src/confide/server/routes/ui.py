"""``/ui``: the review page, three files served by the app (no CDN, no build step).

The page signs in with an API key (kept in the page's memory, sent only as a bearer header)
and drives the ``/v1`` routes; memory values are fetched in JSON bodies and shown as text,
never put in a URL. A strict Content-Security-Policy allows only this origin.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import Response

router = APIRouter(prefix="/ui", tags=["ui"], include_in_schema=False)

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}


def _file(name: str) -> Response:
    body = files("confide.server").joinpath("ui", name).read_bytes()
    return Response(body, media_type=_TYPES[name], headers=_HEADERS)


@router.get("")
async def page() -> Response:
    """The review page."""
    return _file("index.html")


@router.get("/app.js")
async def script() -> Response:
    """The page's script."""
    return _file("app.js")


@router.get("/app.css")
async def style() -> Response:
    """The page's style sheet."""
    return _file("app.css")
