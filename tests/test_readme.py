"""What the README says beyond its blocks (tests/test_snippets.py runs those): the quick
start is repeatable; the key rotation and the voice-bridge walk-through say what they must;
the extras, the command list and the route tables are those of the code; it says to activate
the virtualenv before it calls ``confide``; the profiles it shows are the shipped ones."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from tests.test_snippets import README, ROOT, Block, blocks_of, snippet_env

from confide import cli
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.retrieval.categories import DEFAULT_CATEGORIES_FILE
from confide.server.app import create_app


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


def section(title: str) -> str:
    """The README's text from the heading ``title`` to the next heading of its level."""
    text = README.read_text(encoding="utf-8")
    level = title.split(" ")[0]
    start = text.index(f"\n{title}\n")
    end = text.find(f"\n{level} ", start + len(title) + 2)
    return text[start : end if end > 0 else len(text)]


def makefile(name: str) -> str:
    """The value of ``name ?= ...`` in the Makefile."""
    found = re.search(rf"^{name} \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found is not None, name
    return found[1]


def test_readme_says_to_activate_the_virtualenv_before_it_calls_confide() -> None:
    text = README.read_text(encoding="utf-8")
    first = next(
        b
        for b in blocks_of(README)
        if b.lang in ("bash", "sh", "console")
        and re.search(r"^\s*(\S+=\S+ )*confide ", b.code, re.M)
    )
    before = "\n".join(text.splitlines()[: first.line]) + first.code
    assert "source .venv/bin/activate" in before, f"{first.name} calls confide, not on PATH yet"


def test_the_extras_table_has_a_row_for_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    rows = re.findall(r"^\| `([\w-]+)` \|", section("## Extras"), re.MULTILINE)
    assert sorted(rows) == sorted(extras)


def test_the_readme_names_the_extras_the_makefile_installs() -> None:
    extras = section("## Extras")
    run, test = makefile("RUN_EXTRAS"), makefile("EXTRAS")
    assert f"`make run` installs `{run}`" in extras
    assert f"`make test` installs `{test}`" in extras
    sizes = README.read_text(encoding="utf-8")
    assert f"| `make run`: `{run}` |" in sizes and f"| `make test`: `{test}` |" in sizes


def test_the_command_list_names_every_command() -> None:
    lines = [f"{line} " for line in section("## Command line").splitlines()]

    def commands(group: click.Group, prefix: str) -> Iterator[str]:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, f"{prefix} {name}")
            else:
                yield f"{prefix} {name}"

    listed = [c for c in commands(cli.main, "confide") if any(x.startswith(f"{c} ") for x in lines)]
    assert sorted(set(commands(cli.main, "confide")) - set(listed)) == []


METHODS = r"(?:GET|POST|PUT|PATCH|DELETE|WS)(?:/(?:GET|POST|PUT|PATCH|DELETE))*"


def routes_in_tables() -> set[tuple[str, str]]:
    """(method, path with ``{}`` for each parameter) of every route-table row."""
    found: set[tuple[str, str]] = set()
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        methods: list[str] = []
        base = ""
        for span in re.findall(r"`([^`]*)`", line[2:].split(" | ")[0]):
            match = re.fullmatch(rf"(?:({METHODS}) )?((?:\.\.\.)?/\S*)", span)
            if match is None:
                continue
            if match[1]:
                methods = match[1].split("/")
            path = match[2].split("?")[0]
            if path.startswith("..."):
                path = base + path[3:]  # `.../restore` after `/v1/memories/{id}`
            else:
                base = path
            found.update((m, re.sub(r"\{[^}]*\}", "{}", path)) for m in methods)
    return found


@pytest.mark.parametrize("storage_url", ["sqlite"], indirect=True)
def test_the_route_tables_list_every_route_of_the_service(
    engine: MemoryEngine, settings: Settings
) -> None:
    app = create_app(settings, engine=engine, warm_up=False)
    served = {
        (method.upper(), re.sub(r"\{[^}]*\}", "{}", path))
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    listed = {route for route in routes_in_tables() if route[0] != "WS"}
    assert sorted(served - listed) == [], "routes the README's tables do not list"
    assert sorted(listed - served) == [], "routes the README lists that the service lacks"


def test_the_readme_shows_the_shipped_profiles() -> None:
    shipped = yaml.safe_load(DEFAULT_CATEGORIES_FILE.read_text(encoding="utf-8"))
    shown = [yaml.safe_load(b.code) for b in blocks_of(README) if b.lang == "yaml"]
    profiles = [s for s in shown if isinstance(s, dict) and "profiles" in s]
    assert profiles, "the README shows a profiles: block"
    for block in profiles:
        assert block["profiles"].items() <= shipped["profiles"].items()
        assert block["allowlists"].items() <= shipped["allowlists"].items()
