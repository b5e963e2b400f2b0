"""The benchmarks' progress bars: counts and rate on a terminal, nothing on a pipe."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _progress import counted, progress_bar, say

ROOT = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    """A stream tqdm takes for a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_short_benchmark_draws_no_bar_when_stderr_is_not_a_terminal() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ttl.py"), "--memories", "50"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert "sqlite: 50 memories" in done.stdout
    for bar_text in ("\r", "%|", "memories/s", "jobs/s"):
        assert bar_text not in done.stderr
        assert bar_text not in done.stdout


def test_counted_shows_counts_and_rate_on_a_terminal_and_nothing_elsewhere() -> None:
    terminal, pipe = Terminal(), io.StringIO()
    assert list(counted(range(5), "storing", "memories", file=terminal)) == list(range(5))
    assert list(counted(range(5), "storing", "memories", file=pipe)) == list(range(5))
    drawn = terminal.getvalue()
    assert "storing" in drawn and "5/5" in drawn and "memories/s" in drawn
    assert pipe.getvalue() == ""


def test_the_callback_bar_is_the_command_lines_and_lines_said_reach_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = Terminal()
    monkeypatch.setattr("confide.cli._terminal", lambda: terminal)
    with progress_bar("fuzz", "cases") as show:
        show(3, 10)
        say("  sqlite: 3 cases")
        show(10, 10)
    assert "10/10" in terminal.getvalue() and "cases/s" in terminal.getvalue()
    assert capsys.readouterr().out == "  sqlite: 3 cases\n"
