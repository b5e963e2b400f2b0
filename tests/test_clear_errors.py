"""A mistake in the setup is one line that names the variable, the extra or the option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from confide.cli import main

HIDE = "import sys\nsys.modules[{module!r}] = None\n"


def _python(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFIDE_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "CONFIDE_HOME": str(home), "CONFIDE_EMBEDDER": "none"},
        timeout=300,
    )


def test_a_postgresql_url_without_the_extra_names_the_extra(tmp_path: Path) -> None:
    code = HIDE.format(module="psycopg") + (
        "from confide.config import Settings\n"
        "from confide.client import Confide\n"
        "Confide.open(Settings(storage_url='postgresql://127.0.0.1:9/confide'))\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("confide.errors.MissingDependencyError: ")
    assert "pip install 'confide[postgres]'" in last
    assert "NameError" not in done.stderr


@pytest.mark.parametrize("module", ["langchain_core", "langgraph"])
def test_the_langgraph_package_without_its_extra_names_the_extra(
    module: str, tmp_path: Path
) -> None:
    done = _python(HIDE.format(module=module) + "import confide.langgraph\n", tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("confide.errors.MissingDependencyError: ")
    assert "pip install 'confide[langgraph]'" in last


def test_a_bad_setting_is_one_line_naming_its_variable(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["list", "--account", "a", "--user", "u"],
        env={"CONFIDE_HOME": str(tmp_path), "CONFIDE_TTL_IDLE_DAYS": "0"},
    )
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: invalid setting CONFIDE_TTL_IDLE_DAYS: Input should be greater than 0"
    )


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--http"]])
def test_a_port_out_of_range_is_refused_before_anything_loads(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--port", "99999"])
    assert result.exit_code == 2
    assert "Invalid value for '--port': 99999 is not in the range 0<=x<=65535" in result.output
    assert "Traceback" not in result.output
