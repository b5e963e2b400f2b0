"""How much disk a virtualenv with Confide takes, per set of extras.

For each set it makes a fresh ``python3 -m venv`` in a temporary folder, installs the package
(non-editable) from a clean export of a git revision (``git archive``, so the working tree is
neither built in nor dirtied) and measures the folder as ``du`` would (allocated blocks, each
hard-linked file once). An empty venv is measured too, as the baseline every figure includes.

    python bench/venv_size.py                       # `make run`'s and `make test`'s extras at HEAD
    python bench/venv_size.py --rev e296bdd --extras test,postgres,local,server,tokens
    python bench/venv_size.py --json sizes.json

The packages come from whatever index pip is configured with; a mirror that serves a CPU torch
wheel gives a smaller figure for a torch-based revision than the public index (CUDA wheels).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def makefile_extras(name: str, *, rev: str = "HEAD") -> str:
    """The value of ``name ?= ...`` in the Makefile at ``rev``."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:Makefile"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    match = re.search(rf"^{name}\s*\??=\s*(\S+)", text, re.MULTILINE)
    if match is None:
        raise SystemExit(f"no {name} in the Makefile at {rev}")
    return match.group(1)


def disk_usage(folder: Path) -> int:
    """Bytes allocated under ``folder``, counting each hard-linked file once (like ``du -s``)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            info = os.lstat(os.path.join(dirpath, name))
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    return total


def export(rev: str, into: Path) -> Path:
    """Unpack ``git archive rev`` into ``into/src`` and return that folder."""
    source = into / "src"
    source.mkdir()
    archive = into / "src.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, stdout=out)
    with tarfile.open(archive) as tar:
        tar.extractall(source, filter="data")
    archive.unlink()
    return source


def build(source: Path | None, extras: str | None, into: Path) -> tuple[int, float]:
    """Make a venv in ``into``, install ``source[extras]`` (nothing if ``source`` is None).

    Returns the venv's size in bytes and the install's wall time in seconds.
    """
    subprocess.run([sys.executable, "-m", "venv", str(into)], check=True)
    start = time.perf_counter()
    if source is not None:
        target = f"{source}[{extras}]" if extras else str(source)
        subprocess.run(
            [
                str(into / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-cache-dir",
                target,
            ],
            check=True,
        )
    return disk_usage(into), time.perf_counter() - start


def main() -> int:
    """Build the venvs and print their sizes."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rev", default="HEAD", help="git revision to install (default HEAD)")
    parser.add_argument(
        "--extras",
        action="append",
        help="a comma-separated set of extras (repeatable; default: the Makefile's "
        "RUN_EXTRAS and EXTRAS at --rev)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.extras:
        sets = {extras: extras for extras in args.extras}
    else:
        sets = {
            "make run": makefile_extras("RUN_EXTRAS", rev=args.rev),
            "make test": makefile_extras("EXTRAS", rev=args.rev),
        }
    rows: list[tuple[str, str, int, float]] = []  # set, extras, bytes, install seconds
    with tempfile.TemporaryDirectory(prefix="confide-venv-size-") as tmp:
        work = Path(tmp)
        source = export(args.rev, work)
        empty, _ = build(None, None, work / "empty")
        rows.append(("empty venv", "", empty, 0.0))
        for index, (label, extras) in enumerate(sets.items()):
            size, seconds = build(source, extras, work / f"venv{index}")
            rows.append((label, extras, size, seconds))
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"virtualenv size at {commit} (python {sys.version.split()[0]})")
    width = max(len(label) for label, *_ in rows)
    print(f"{'set':<{width}} {'MB':>6} {'install s':>10}  extras")
    for label, extras, size, seconds in rows:
        print(f"{label:<{width}} {size / 1e6:>6.0f} {seconds:>10.0f}  {extras}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rev": commit,
                    "venvs": [
                        {
                            "set": label,
                            "extras": extras,
                            "bytes": size,
                            "install_s": round(seconds, 1),
                        }
                        for label, extras, size, seconds in rows
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
