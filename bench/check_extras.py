"""Check that installing Confide with the everyday extras pulls no torch, CUDA or triton wheels.

Asks pip (from the package registry, nothing is installed) what ``pip install -e '.[EXTRAS]'``
would bring into a fresh environment, and fails when any of it is torch, an ``nvidia-*`` wheel
or triton. Run it with the interpreter of a fresh virtual environment, so that pip resolves for
an empty site-packages as a user's first ``make run`` would:

    python3 -m venv /tmp/embed-venv
    /tmp/embed-venv/bin/python bench/check_extras.py    # make run's, make test's, the mem0 bench's

Needs the package registry, so it is a script rather than a test in the suite.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.*)$")


def resolve(extras: str) -> list[tuple[str, str]]:
    """Name and version of every distribution pip would install, Confide included."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--ignore-installed",
                "--report",
                str(report),
                "-e",
                f"{ROOT}[{extras}]",
            ],
            check=True,
        )
        data = json.loads(report.read_text(encoding="utf-8"))
    return sorted(
        (item["metadata"]["name"].lower(), item["metadata"]["version"]) for item in data["install"]
    )


# The extras `make run` (RUN_EXTRAS) and `make test` (EXTRAS) install, and the embedder with
# mem0 for bench/locomo.py's comparison (mem0 runs on Confide's ONNX MiniLM there).
DEFAULT_SETS = (
    "local,server,tokens",
    "test,postgres,local,server,tokens,fast,mcp,langgraph",
    "local,bench",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--extras",
        action="append",
        help="a set of extras (repeatable; default: make's two, then local,bench)",
    )
    args = parser.parse_args()
    failed = False
    for extras in args.extras or DEFAULT_SETS:
        packages = resolve(extras)
        bad = [f"{name}=={version}" for name, version in packages if FORBIDDEN.match(name)]
        print(f"confide[{extras}] would install {len(packages)} distributions:")
        print("  " + ", ".join(f"{name}=={version}" for name, version in packages))
        if bad:
            print(f"FAIL: {', '.join(bad)}")
            failed = True
        else:
            print("OK: no torch, no nvidia-*, no triton")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
