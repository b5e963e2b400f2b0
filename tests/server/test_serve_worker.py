"""``confide serve`` runs a background worker on SQLite (CONFIDE_SERVE_WORKER), stopped on
shutdown."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from confide.config import Settings
from confide.server import create_app
from confide.workers import JobContext, enqueue

KEY = "23" * 32


def test_the_service_runs_queued_jobs_on_sqlite_and_stops_its_worker(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "home", encryption_key=KEY, embedder="none", worker_poll_seconds=0.05
    )
    app = create_app(settings, warm_up=False)
    worker = app.state.worker
    assert worker is not None and not worker.running
    ran = threading.Event()

    def probe(ctx: JobContext) -> None:
        ran.set()

    worker.worker.register("probe", probe)
    enqueue(app.state.services.engine, "probe", account_id=None)

    async def start_and_stop() -> None:
        async with app.router.lifespan_context(app):
            assert worker.running
            assert await asyncio.to_thread(ran.wait, 30)

    asyncio.run(start_and_stop())
    assert not worker.running


def test_the_worker_can_be_turned_off(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "home", encryption_key=KEY, embedder="none", serve_worker="off"
    )
    app = create_app(settings, warm_up=False)
    assert app.state.worker is None

    async def start_and_stop() -> None:
        async with app.router.lifespan_context(app):
            pass

    asyncio.run(start_and_stop())
