"""A plain ``pip install`` (no ``local`` extra): Confide runs without an embedder and says so once.

Each case runs in a fresh interpreter in which importing ONNX Runtime or tokenizers fails (a
``None`` entry in ``sys.modules``), on a temporary CONFIDE_HOME.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HIDE = "import sys\nsys.modules[{module!r}] = None\n"


def _python(code: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CONFIDE_") and k != "MEMORY_ENCRYPTION_KEY"
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**clean, "CONFIDE_HOME": str(home), **env},
        timeout=300,
    )


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers"])
def test_without_the_extra_the_default_embedder_falls_back_to_none_with_one_warning(
    module: str, tmp_path: Path
) -> None:
    code = HIDE.format(module=module) + (
        "from confide import Confide\n"
        "for _ in range(2):\n"
        "    with Confide.open() as memory:\n"
        "        assert memory.embedder is None\n"
        "        memory.add('Ali has a dog named Biscuit.', user_id='alice')\n"
        "        hits = memory.search('dog', user_id='alice')\n"
        "        print(len(hits), hits[0].memory.value)\n"
    )
    out = _python(code, tmp_path / "home")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["1 Ali has a dog named Biscuit."] * 2
    warnings = [line for line in out.stderr.splitlines() if "runs without an embedder" in line]
    assert len(warnings) == 1, out.stderr
    assert f"{module} is not installed" in warnings[0]
    assert "pip install 'confide[local]'" in warnings[0]


def test_an_explicitly_configured_local_embedder_still_names_the_extra(tmp_path: Path) -> None:
    code = HIDE.format(module="onnxruntime") + (
        "from confide import Confide\n"
        "from confide.errors import MissingDependencyError\n"
        "with Confide.open() as memory:\n"
        "    try:\n"
        "        memory.add('Ali has a dog named Biscuit.', user_id='alice')\n"
        "    except MissingDependencyError as exc:\n"
        "        print(exc)\n"
    )
    out = _python(code, tmp_path / "home", CONFIDE_EMBEDDER="local:all-MiniLM-L6-v2")
    assert out.returncode == 0, out.stderr
    assert "pip install 'confide[local]'" in out.stdout
    assert "runs without an embedder" not in out.stderr


def test_setting_the_embedder_to_none_silences_the_warning(tmp_path: Path) -> None:
    code = HIDE.format(module="onnxruntime") + (
        "from confide import Confide\nwith Confide.open() as memory:\n    print(memory.embedder)\n"
    )
    out = _python(code, tmp_path / "home", CONFIDE_EMBEDDER="none")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"
    assert "runs without an embedder" not in out.stderr


def test_the_demo_runs_without_the_extra(tmp_path: Path) -> None:
    code = HIDE.format(module="onnxruntime") + (
        "from confide.cli import main\nmain(['demo'], standalone_mode=False)\n"
    )
    out = _python(code, tmp_path / "home")
    assert out.returncode == 0, out.stderr
    assert "Biscuit" in out.stdout
    assert sum("runs without an embedder" in line for line in out.stderr.splitlines()) == 1
