"""``confide serve`` loads what the first tool call would otherwise load, before it listens."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from confide.config import Settings
from confide.server import create_app
from confide.storage import vector_kernels

pytestmark = pytest.mark.slow
KEY = "22" * 32


def test_the_app_loads_the_embedder_and_the_search_loops_at_start_up(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "home", encryption_key=KEY, embedder="local:all-MiniLM-L6-v2"
    )
    lines: list[str] = []
    app = create_app(settings, progress=lines.append)
    embedder = app.state.services.embedder
    model = getattr(embedder, "inner", embedder)
    vector_kernels.use_numba(vector_kernels.numba_available())  # the loops are chosen anew
    assert not model.loaded and not vector_kernels.kernels_ready()

    async def start_and_stop() -> None:
        async with app.router.lifespan_context(app):
            assert model.loaded and vector_kernels.kernels_ready()

    asyncio.run(start_and_stop())
    assert lines[0] == "loading embedder all-MiniLM-L6-v2 …"
    assert lines[1].startswith("warm-up done in ") and lines[1].endswith(" s")
    assert len(lines) == 2


def test_warm_up_can_be_turned_off(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", encryption_key=KEY, embedder="none")
    lines: list[str] = []
    app = create_app(settings, progress=lines.append, warm_up=False)

    async def start_and_stop() -> None:
        async with app.router.lifespan_context(app):
            pass

    asyncio.run(start_and_stop())
    assert lines == []


def test_confide_serve_says_it_loads_the_embedder_before_it_listens(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CONFIDE_STORAGE_URL",)}
    env.update(CONFIDE_HOME=str(tmp_path / "home"), MEMORY_ENCRYPTION_KEY=KEY)
    command = [sys.executable, "-c", "from confide.cli import main; main()", "serve", "--port", "0"]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    seen: list[str] = []
    try:
        for line in server.stderr:  # ends at EOF if the server dies
            seen.append(line.strip())
            if "Uvicorn running on " in line:
                break
        base = seen[-1].split("Uvicorn running on ", 1)[1].split()[0]
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
    finally:
        server.terminate()
        server.communicate(timeout=60)
    loading = seen.index("confide: loading embedder all-MiniLM-L6-v2 …")
    complete = next(i for i, line in enumerate(seen) if "Application startup complete" in line)
    assert loading < complete
    assert any(line.startswith("confide: warm-up done in ") for line in seen[loading:complete])
