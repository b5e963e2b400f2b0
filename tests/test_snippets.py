"""Every Python and shell block of README.md and docs/*.md runs, as written, and prints what
the text shows.

A fenced block is runnable when its language is ``python``, ``bash``, ``sh`` or ``console``.
Each runs in a fresh interpreter or a fresh ``bash -e``, in an empty working folder whose
``.venv`` is this interpreter's virtualenv (so ``source .venv/bin/activate`` works as after
``make run``), with this interpreter's ``bin`` first on ``PATH`` (``confide`` is the one under
test), a fresh ``CONFIDE_HOME``, ``MEMORY_ENCRYPTION_KEY`` set as the README's configuration
table says, no other ``CONFIDE_``/``XAI_`` variable, and the wall clock reading ``WRITTEN``
(tests/clock.py) so that dates and date-dependent scores are those the text shows.

An HTML comment on the line before a block says how it runs (``<!-- snippet: KIND -->``):

- ``output``: this block (any language) is what the runnable block before it prints.
- ``service``: this shell block starts the service (``confide serve --port 8765 &``); the
  blocks of the same file marked ``needs-service`` run after it, in the same shell, which
  is killed at the end. One per file.
- ``needs-service``: runs in the shell of its file's ``service`` block.
- ``fragment (why)``: not run; the reason is required, and fragments stay few.

In a shell block, ``#>`` lines after a command show what it prints (``console`` blocks: the
lines after a ``$ `` command). Printed output is compared after normalising what differs from
run to run, explicitly: UUIDs, ISO 8601 times and API keys become placeholders, the service's
port 8765 is a free one, ``...`` in the text stands for any text (``597bd014-...``, an id
the text shortens, for any id), and ``#>`` lines are
compared joined (a JSON answer is one line, wrapped in the text).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.clock import clock_env

import confide

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = (README, *sorted((ROOT / "docs").glob("*.md")))
SOURCE = Path(confide.__file__).resolve().parent.parent
"""The ``src`` folder of the package under test, first on the snippets' ``PYTHONPATH``."""
WRITTEN = datetime(2026, 11, 28, 12, tzinfo=UTC)
"""When the outputs the text shows were printed: a memory's vector embeds its date, so the
quick start's scores are those of that day."""
KEY = "00" * 31 + "2a"
"""``MEMORY_ENCRYPTION_KEY`` for the snippets: 64 hex characters."""
PORT = "8765"
"""The port the text's service listens on; each run uses a free one instead."""
RUNNABLE = ("python", "bash", "sh", "console")
KINDS = ("output", "service", "needs-service", "fragment")
MARKER = re.compile(r"<!--\s*snippet:\s*(?P<kind>[a-z-]+)\s*(?:\((?P<why>[^)]*)\))?\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
SEPARATOR = "@@snippet-output@@"


@dataclass
class Block:
    """A fenced block of a document, with its marker."""

    doc: Path
    line: int
    lang: str
    code: str
    kind: str | None = None
    why: str | None = None
    output: Block | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return f"{self.doc.name}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE and self.kind != "output"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, in order, each with the marker before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = MARKER.fullmatch(previous.strip())
        block = Block(path, index + 1, fence["lang"], "\n".join(lines[index + 1 : end]) + "\n")
        if marker is not None:
            block.kind, block.why = marker["kind"], marker["why"]
        blocks.append(block)
        index = end + 1
    for before, block in itertools.pairwise(blocks):
        if block.kind == "output":
            before.output = block
    return blocks


ALL = [block for path in DOCS for block in blocks_of(path)]
RUN = [b for b in ALL if b.runnable and b.kind is None]
"""Blocks run on their own."""
SERVED = {
    path: [b for b in ALL if b.doc == path and b.kind in ("service", "needs-service")]
    for path in DOCS
    if any(b.doc == path and b.kind == "service" for b in ALL)
}
"""Per file: its service block, then the blocks run against it."""


# What differs from one run to the next, as the text writes it.
VARYING = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<id>"),
    (re.compile(r"[0-9a-f]{8}-\.\.\."), "<id>"),  # an id the text shortens
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"cfk_[0-9a-f]{16}_[\w-]+"), "<key>"),
)


def normalise(text: str) -> str:
    for pattern, placeholder in VARYING:
        text = pattern.sub(placeholder, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is ``expected``, where ``...`` in ``expected`` is any text."""
    parts = [re.escape(part) for part in normalise(expected).split("...")]
    return re.fullmatch(".*?".join(parts), normalise(printed), re.DOTALL) is not None


def shell_script(block: Block) -> tuple[str, list[str]]:
    """The block as a bash script that prints a separator after each shown output, and the
    outputs it shows (``#>`` lines; a ``console`` block's lines after each ``$ `` command)."""
    lines = block.code.splitlines()
    if block.lang == "console":
        lines = [
            line[2:] if line.startswith("$ ") else f"#> {line}" if line.strip() else line
            for line in lines
        ]
    script: list[str] = []
    shown: list[list[str]] = []
    for number, line in enumerate(lines):
        if line.startswith("#>"):
            if not (number and lines[number - 1].startswith("#>")):
                shown.append([])
            shown[-1].append(line[2:].strip())
            if number + 1 == len(lines) or not lines[number + 1].startswith("#>"):
                script.append(f"printf '\\n%s\\n' {SEPARATOR}")
        else:
            script.append(line)
    return "\n".join(script) + "\n", ["".join(output) for output in shown]


def compare_shell(name: str, shown: list[tuple[Block, str]], printed: str) -> None:
    """Each output the blocks show (in order) against what their commands printed."""
    chunks = printed.split(f"\n{SEPARATOR}\n")
    assert len(chunks) == len(shown) + 1, f"{name} stopped early, having printed:\n{printed}"
    for (block, expected), chunk in zip(shown, chunks, strict=False):
        got = "".join(line.strip() for line in chunk.splitlines())
        assert matches(expected, got), f"{block.name}: printed\n{got}\ninstead of\n{expected}"
    assert not chunks[-1].strip(), f"{name} printed what the text does not show: {chunks[-1]}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty working folder whose ``.venv`` is this interpreter's virtualenv."""
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return work


def snippet_env(tmp_path: Path) -> dict[str, str]:
    """The snippets' environment: a fresh home, the README's key variable, the fixed clock."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONFIDE_", "XAI_", "VIRTUAL_ENV")) and k != "MEMORY_ENCRYPTION_KEY"
    }
    base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE), base.get("PYTHONPATH")]))
    base["CONFIDE_HOME"] = str(tmp_path / "home")
    base["MEMORY_ENCRYPTION_KEY"] = KEY
    base["TMPDIR"] = str(tmp_path)
    return clock_env(base, WRITTEN)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return snippet_env(tmp_path)


def run_python(block: Block, folder: Path, env: dict[str, str]) -> str:
    script = folder / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr}"
    return done.stdout


def run_bash(name: str, script: str, folder: Path, env: dict[str, str]) -> str:
    """``bash -e script`` in its own process group, which is ended when it finishes."""
    path = folder / "snippet.sh"
    path.write_text(script, encoding="utf-8")
    with subprocess.Popen(
        ["bash", "-e", path.name],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=180)
        finally:
            # The service a block started in the background, and anything else it left.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    assert process.returncode == 0, f"{name} failed:\n{stdout}\n{stderr}"
    return stdout


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=lambda b: b.name)
def test_block_runs_and_prints_what_the_text_shows(
    block: Block, folder: Path, env: dict[str, str]
) -> None:
    if block.lang == "python":
        printed = run_python(block, folder, env)
        if block.output is not None:
            assert matches(block.output.code, printed), (
                f"{block.name} printed\n{printed}\ninstead of\n{block.output.code}"
            )
        return
    script, shown = shell_script(block)
    printed = run_bash(block.name, script, folder, env)
    compare_shell(block.name, [(block, output) for output in shown], printed)


@pytest.mark.slow
@pytest.mark.parametrize("doc", list(SERVED), ids=lambda p: p.name)
def test_blocks_run_against_the_service_their_file_starts(
    doc: Path, folder: Path, env: dict[str, str]
) -> None:
    blocks = SERVED[doc]
    assert blocks[0].kind == "service", f"{blocks[0].name} runs before its file's service"
    assert PORT in blocks[0].code, f"{blocks[0].name}: the service listens on {PORT}"
    scripts = [shell_script(block) for block in blocks]
    whole = "".join(script for script, _ in scripts).replace(PORT, str(free_port()))
    printed = run_bash(doc.name, whole, folder, env)
    shown = [
        (block, output)
        for block, (_, outputs) in zip(blocks, scripts, strict=True)
        for output in outputs
    ]
    compare_shell(doc.name, shown, printed)


def test_every_marker_is_known_and_in_its_place() -> None:
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for found in MARKER.finditer(text):
            assert found["kind"] in KINDS, f"{path.name}: unknown snippet marker {found[0]}"
        blocks = blocks_of(path)
        assert len(MARKER.findall(text)) == sum(b.kind is not None for b in blocks), (
            f"{path.name}: a snippet marker is not on the line before a block"
        )
        for before, block in zip([None, *blocks], blocks, strict=False):
            if block.kind == "output":
                assert before is not None and before.runnable, f"{block.name}: output of what?"
            if block.kind == "fragment":
                assert block.why, f"{block.name}: a fragment says why it is one"
            if block.kind in ("service", "needs-service"):
                assert block.lang in ("bash", "sh", "console"), f"{block.name}: not a shell block"
        services = [b for b in blocks if b.kind == "service"]
        assert len(services) <= 1, f"{path.name}: one service per file"
        if any(b.kind == "needs-service" for b in blocks):
            assert services, f"{path.name}: blocks need a service the file does not start"


def test_fragments_are_few() -> None:
    code = [b for b in ALL if b.lang in RUNNABLE and b.kind != "output"]
    fragments = [b.name for b in code if b.kind == "fragment"]
    # The README's two commands (they build .venv and run the whole suite), the benchmarks
    # (minutes each) and a new backend's test files: few, and they stay few.
    assert len(fragments) <= max(3, len(code) // 10), fragments
    assert len(code) - len(fragments) >= 6, "the docs' runnable blocks were not found"


def test_the_runner_reads_shown_output_and_console_blocks(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- snippet: fragment (an example) -->\n```python\nx\n```\n\n"
        "```console\n$ echo a b\na b\n$ true\n```\n"
        '```bash\necho \'{"id": 1}\'\n#> {"id":\n#>  1}\necho done\n```\n',
        encoding="utf-8",
    )
    fragment, console, bash = blocks_of(doc)
    assert (fragment.kind, fragment.why, fragment.runnable) == ("fragment", "an example", True)
    script, shown = shell_script(console)
    assert shown == ["a b"] and script.splitlines()[0] == "echo a b"
    script, shown = shell_script(bash)
    assert shown == ['{"id":1}'] and script.count(SEPARATOR) == 1
    assert matches('{"id":"...","at":"2026-01-01T00:00:00Z"}', '{"id":"x","at":"<time>"}')
    assert not matches("a ... c", "a b")
