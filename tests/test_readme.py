"""The README's Python quick-start runs and prints what the README says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.clock import clock_env

README = Path(__file__).resolve().parent.parent / "README.md"
WRITTEN = datetime(2026, 11, 28, 12, tzinfo=UTC)
"""When the quick start's output in the README was printed."""


def quick_start() -> tuple[str, str]:
    """The first python block of the "Python API" section and the text block after it."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Python API") :]
    found = re.search(r"```python\n(.*?)```.*?```text\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the Python API section needs a python block and its output"
    return found.group(1), found.group(2)


@pytest.mark.slow
def test_readme_quick_start_prints_what_the_readme_shows(tmp_path: Path) -> None:
    code, expected = quick_start()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFIDE_", "XAI_")) and k != "MEMORY_ENCRYPTION_KEY"
    }
    env["CONFIDE_HOME"] = str(tmp_path / "home")
    # A memory's vector embeds its date ("(28 November 2026) Her dog ..."), so the scores the
    # README prints are those of the day it was written: the script runs on that day.
    env = clock_env(env, WRITTEN)
    script = tmp_path / "quick_start.py"
    script.write_text(code, encoding="utf-8")
    first = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout == expected
    again = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert again.returncode == 0, again.stderr
    answers = expected.splitlines()[1:]
    assert again.stdout.splitlines() == ["extracted: nothing new", *answers]


def test_readme_says_where_a_rotation_keeps_the_former_key_and_how_to_retire_it() -> None:
    text = README.read_text(encoding="utf-8")
    rotate = text[text.index("confide keys rotate") : text.index("confide list [--account")]
    assert "master.key.old" in rotate and "confide keys retire" in rotate
    assert "delete master.key.old" in rotate


def test_readme_walks_through_a_voice_bridge_call_on_the_real_routes() -> None:
    text = README.read_text(encoding="utf-8")
    walk = text[text.index("### A voice-bridge call") : text.index("## Command line")]
    for path in (
        "$E/sessions -d",
        "$E/sessions/$SID/connected",
        "$E/sessions/$SID/turns",
        "$E/tools/store_memory",
        "$E/tools/update_memory",
        "$E/sessions/$SID/end",
        "$E/v1/memories?user_id=line-42",
        "$E/v1/memory_query",
    ):
        assert path in walk
    assert "a **line** is a user, as in a phone line" in walk
