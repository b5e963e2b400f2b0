"""bench/throughput.py in a tiny configuration: every cell answered, the JSON's keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CELL_KEYS = {
    "backend",
    "transport",
    "servers",
    "operation",
    "clients",
    "seconds",
    "requests",
    "rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "errors",
    "error_kinds",
    "serve_cores",
    "serve_cores_each",
    "loop_cores",
    "bench_cores",
    "machine_cores",
}


@pytest.mark.slow
def test_a_tiny_run_answers_every_request_and_writes_the_documented_figures(
    tmp_path: Path,
) -> None:
    out = tmp_path / "throughput.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "throughput.py"),
            *("--clients", "1,2", "--seconds", "1", "--backends", "sqlite"),
            *("--prefill", "40", "--users", "2", "--no-mem0", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert figures["setup"]["prefill"] == 40
    assert figures["setup"]["mem0"] == "skipped: --no-mem0"
    cells = figures["cells"]
    assert [(c["operation"], c["clients"]) for c in cells] == [
        ("query", 1),
        ("query", 2),
        ("write", 1),
        ("write", 2),
    ]
    for cell in cells:
        assert set(cell) == CELL_KEYS
        assert (cell["backend"], cell["transport"], cell["servers"]) == ("sqlite", "http", 1)
        assert cell["requests"] > 0 and cell["errors"] == 0 and cell["error_kinds"] == {}
        assert len(cell["serve_cores_each"]) == 1
    assert "sqlite" in done.stdout and "mem0: skipped: --no-mem0" in done.stdout
