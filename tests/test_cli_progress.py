"""Progress bars of the long commands: drawn with counts and rate on a terminal, silent on a
pipe (and in these tests' runner, whose standard error is not a terminal)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from confide.cli import main
from confide.client import DEFAULT_ACCOUNT


class Terminal(io.StringIO):
    """Standard error as a terminal shows it to tqdm."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from confide.config import Settings
    from confide.engine import MemoryEngine

    monkeypatch.delenv("MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.delenv("CONFIDE_STORAGE_URL", raising=False)
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CONFIDE_EMBEDDER", "none")
    with MemoryEngine.open(Settings(home=tmp_path / "home")) as engine:
        for n in range(3):
            engine.store(
                {"account_id": DEFAULT_ACCOUNT, "user_id": "ana", "key": f"k{n}", "value": "v."}
            )
    return tmp_path / "home"


def _commands(tmp_path: Path) -> list[tuple[str, list[str], str]]:
    """Each command with a bar: its label, arguments and the unit its rate is in."""
    document = tmp_path / "ana.json"
    return [
        ("exporting", ["export", "--user", "ana", "--out", str(document)], "versions"),
        ("importing", ["import", str(document), "--user", "ana-copy"], "versions"),
        ("re-indexing", ["reindex", "--yes"], "versions"),
        ("running jobs", ["worker", "--once"], "jobs"),
        ("erasing", ["erase-user", "--user", "ana", "--yes"], "steps"),
    ]


def _run(args: list[str]) -> Result:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_long_commands_draw_counts_and_rate_on_a_terminal(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for label, args, unit in _commands(tmp_path):
        terminal = Terminal()
        monkeypatch.setattr("confide.cli._terminal", lambda terminal=terminal: terminal)
        _run(args)
        drawn = terminal.getvalue()
        assert drawn.startswith(f"\r{label}"), (label, drawn)
        final = drawn.split("\r")[-1]
        assert f" {unit}/s]" in final, (label, final)
        if unit != "jobs":  # a worker's total is not known: a count alone
            assert re.search(r"100%\|.*\| (\d+)/\1 ", final), (label, final)
    copied = json.loads((tmp_path / "ana.json").read_text())
    assert len(copied["memories"]) == 3


def test_long_commands_draw_nothing_off_a_terminal(home: Path, tmp_path: Path) -> None:
    for label, args, unit in _commands(tmp_path):
        result = _run(args)
        assert label not in result.stderr and f"{unit}/s" not in result.stderr, result.stderr
        assert "\r" not in result.output
    stderr = _run(["export", "--user", "ana-copy", "--out", str(tmp_path / "c.json")]).stderr
    assert stderr == f"exported 3 memory versions to {tmp_path / 'c.json'}\n"
