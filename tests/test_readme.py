"""What the README says beyond its blocks (tests/test_snippets.py runs those): the quick
start is repeatable, the key rotation and the voice-bridge walk-through say what they must."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_snippets import README, Block, blocks_of, snippet_env


def quick_start() -> Block:
    """The first python block of the "Python API" section, with the output it shows."""
    text = README.read_text(encoding="utf-8")
    after = text[: text.index("## Python API")].count("\n") + 1
    block = next(b for b in blocks_of(README) if b.line > after and b.lang == "python")
    assert block.output is not None, "the quick start shows what it prints"
    return block


@pytest.mark.slow
def test_readme_quick_start_run_again_finds_nothing_new(tmp_path: Path) -> None:
    # test_snippets compares the first run with the README; here, the second run.
    block = quick_start()
    script = tmp_path / "quick_start.py"
    script.write_text(block.code, encoding="utf-8")
    runs = [
        subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            env=snippet_env(tmp_path),
            timeout=300,
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert block.output is not None
    answers = block.output.code.splitlines()[1:]
    assert runs[1].stdout.splitlines() == ["extracted: nothing new", *answers]


def test_readme_says_where_a_rotation_keeps_the_former_key_and_how_to_retire_it() -> None:
    text = README.read_text(encoding="utf-8")
    rotate = text[text.index("confide keys rotate") : text.index("confide list --account")]
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
