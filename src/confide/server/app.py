"""``create_app(settings)``: the FastAPI service, built on demand (no import-time globals)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse
from fastapi_offline import FastAPIOffline
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from confide.client import Confide
from confide.config import Settings
from confide.conversation.dispatcher import QueryHandler
from confide.conversation.extraction import Extractor
from confide.embedders import Embedder
from confide.engine import MemoryEngine
from confide.server.deps import require_key
from confide.server.errors import install_error_handlers
from confide.server.guard import RequestGuard
from confide.server.logs import access_log
from confide.server.metrics import RouteTimer
from confide.server.routes import (
    apps,
    conversations,
    facts,
    history,
    memories,
    proposals,
    realtime,
    sessions,
    tools,
    usage,
    users,
)
from confide.server.routes import ops as ops_routes
from confide.server.routes import query as query_routes
from confide.server.routes import sdk as sdk_routes
from confide.server.routes import ui as ui_routes
from confide.server.services import Services
from confide.storage.base import Capability
from confide.wiring import build
from confide.workers import Worker as JobWorker
from confide.workers import WorkerThread

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    engine: MemoryEngine | None = None,
    extractor: Extractor | None = None,
    embedder: Embedder | None = None,
    query: QueryHandler | None = None,
    clock: Callable[[], float] | None = None,
    warm_up: bool = True,
    progress: Callable[[str], None] | None = None,
    bind_host: str | None = None,
) -> FastAPI:
    """Build the HTTP service.

    Args:
        settings: Confide settings (read from the environment when omitted).
        engine: an open engine to serve; by default one is opened from ``settings`` and
            closed with the app.
        extractor: overrides the end-of-session extractor chosen from ``settings``.
        embedder: the embedder (by default the configured one when the app opens its
            engine, none over a given engine).
        query: the ``memory_query`` handler, when the retrieval layer provides one.
        clock: wall-clock seconds, for tests.
        warm_up: when the app opens its own engine, load the embedder and the search's
            compiled loops at start-up, before the server accepts requests, so the first
            tool call is as fast as the next ones.
        progress: receives the start-up progress lines (names and seconds only); by
            default they are logged.
        bind_host: the address the server listens on; with ``CONFIDE_API_DOCS=auto`` the
            API docs are served only when it is a loopback address (or unknown).

    The service container is ``app.state.services``; ``await
    app.state.services.tasks.join()`` waits for background extractions.
    """
    # The one wiring (confide.wiring.build): the same components over a given engine as
    # over one opened here.
    components = build(
        settings or Settings(),
        engine=engine,
        embedder=embedder,
        extractor=extractor,
        query=query,
    )
    settings = components.settings
    owns = components.owns_engine
    services = Services(components, clock=time.time if clock is None else clock)
    sdk = Confide.of(components)
    warm = functools.partial(sdk.warm_up, progress or log.info) if owns and warm_up else None

    services.jobs = components.worker()
    worker = _worker_thread(services.jobs, components.engine, settings, owns=owns)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warm is not None:  # uvicorn listens only once this start-up has finished
            await asyncio.to_thread(warm)
        if worker is not None:
            worker.start()
        background = [
            asyncio.create_task(_evict_idle_sessions(services, settings), name="session-sweep"),
        ]
        try:
            yield
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if worker is not None:  # it finishes its current job first
                await asyncio.to_thread(worker.stop)
            await services.tasks.join()
            services.close()

    title, version = "Confide", "0.1.0"
    summary = "Long-term memory for LLM agents: tools, call sessions and the memory store."
    app: FastAPI
    if _serves_docs(settings, bind_host):
        # /docs and /redoc with their scripts, styles and icon served by this app (under
        # /static-offline-docs), never fetched from a CDN; Swagger UI's validator is off.
        app = FastAPIOffline(
            title=title,
            summary=summary,
            version=version,
            lifespan=lifespan,
            swagger_ui_parameters={"validatorUrl": None},
        )
    else:
        app = FastAPI(
            title=title,
            summary=summary,
            version=version,
            lifespan=lifespan,
            docs_url=None,
            redoc_url=None,
            openapi_url=None,
        )
    app.state.services = services
    app.state.worker = worker
    services.sdk = sdk
    # Per-route latency into the app's metrics registry, and one structured access line.
    app.add_middleware(RouteTimer, metrics=services.metrics, log=access_log)
    install_error_handlers(app)
    app.add_middleware(RequestGuard, max_body_bytes=settings.max_body_bytes)
    for module in (
        tools,
        sessions,
        memories,
        query_routes,
        proposals,
        realtime,
        users,
        conversations,
        history,
        facts,
        apps,
        usage,
        ops_routes,
        sdk_routes,
        ui_routes,
    ):
        app.include_router(module.router)
    app.include_router(apps.admin_router)
    app.include_router(users.erasures)

    # Counts across every tenant: any valid API key (read scope) unless made public.
    guard = [] if settings.metrics_public else [Depends(require_key)]

    @app.get("/metrics", response_class=PlainTextResponse, tags=["ops"], dependencies=guard)
    async def metrics() -> PlainTextResponse:
        """Prometheus text-format metrics (counts and durations, never user data); needs an
        API key unless ``CONFIDE_METRICS_PUBLIC=1``."""
        text = await asyncio.to_thread(services.metrics.render)  # it counts pending scrubs
        return PlainTextResponse(text, media_type=CONTENT_TYPE_PLAIN_0_0_4)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness."""
        return {"status": "ok"}

    return app


def _serves_docs(settings: Settings, bind_host: str | None) -> bool:
    if settings.api_docs != "auto":
        return settings.api_docs == "on"
    return bind_host is None or bind_host in ("127.0.0.1", "::1", "localhost")


async def _evict_idle_sessions(services: Services, settings: Settings) -> None:
    """Drop call sessions idle past their window, whether or not another turn arrives."""
    while True:
        await asyncio.sleep(settings.session_sweep_seconds)
        evicted = services.buffer.evict_idle()
        if evicted:
            log.info("evicted %d idle call sessions", evicted)


def _worker_thread(
    jobs: JobWorker, engine: MemoryEngine, settings: Settings, *, owns: bool
) -> WorkerThread | None:
    """The thread to run ``jobs`` in inside this service, if any.

    ``CONFIDE_SERVE_WORKER``: ``on`` always, ``off`` never, ``auto`` (the default) when the
    service opened its own store and that store is SQLite (one process serves it; on
    PostgreSQL run ``confide worker`` processes instead).
    """
    mode = settings.serve_worker
    if mode == "off":
        return None
    if mode == "auto" and (not owns or Capability.MULTI_PROCESS in engine.storage.capabilities):
        return None
    return WorkerThread(jobs)
