"""Packaging check: the wheel alone, installed outside the repository, runs Confide.

Builds the wheel (``pip wheel . --no-deps``), installs it with the ``local`` extra into a fresh
virtualenv in a temporary folder, and from there runs ``confide --version`` and
``confide demo`` with a fresh data folder. It proves that the model file, the tokenizer, the
default categories, the migrations and the review page's assets are in the wheel and that
nothing reads from the source tree. Run by ``make test`` before the suite (it installs from the
package index, which the suite itself never touches).

Usage: ``python tests/packaging/check_wheel.py`` (exit status 0 when every check holds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Files that the installed package must carry, relative to its folder.
PACKAGE_DATA = (
    "py.typed",
    "embedders/minilm/model.onnx",
    "embedders/minilm/model.int8.onnx",
    "embedders/minilm/tokenizer.json",
    "embedders/minilm/LICENSE",
    "retrieval/default_categories.yaml",
    "server/ui/index.html",
    "server/ui/app.js",
    "server/ui/app.css",
    "storage/migrations.py",
)

WHERE_IS_IT = """
import importlib.resources, json, sys, confide
root = importlib.resources.files("confide")
wanted = json.loads(sys.argv[1])
print(json.dumps({"file": confide.__file__,
                  "missing": [p for p in wanted if not (root / p).is_file()]}))
"""


def _run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command``; on failure print what it said and stop with its status."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(f"check_wheel: {' '.join(command)} exited {done.returncode}\n")
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(done.returncode)
    return done.stdout


def _clean_environment(home: Path) -> dict[str, str]:
    """The environment of a user who has only the wheel: no Confide or test settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CONFIDE_", "PYTHON", "TEST_CLOCK", "VIRTUAL_ENV"))
        and name != "MEMORY_ENCRYPTION_KEY"
    }
    env["HOME"] = str(home)
    return env


def main() -> None:
    """Build, install, run; print one line per check."""
    work = Path(tempfile.mkdtemp(prefix="confide-wheel-"))
    try:
        dist = work / "dist"
        _run(
            [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", f"{dist}"],
            cwd=ROOT,
        )
        [wheel] = dist.glob("confide-*.whl")
        version = wheel.name.split("-")[1]
        print(f"check_wheel: built {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)")

        venv = work / "venv"
        _run([sys.executable, "-m", "venv", str(venv)], cwd=work)
        bin_dir = venv / "bin"
        _run([str(bin_dir / "pip"), "install", "-q", f"{wheel}[local]"], cwd=work)
        print("check_wheel: installed with the 'local' extra into a fresh virtualenv")

        env = _clean_environment(work / "home")
        located = _run(
            [str(bin_dir / "python"), "-c", WHERE_IS_IT, json.dumps(PACKAGE_DATA)],
            cwd=work,
            env=env,
        )
        if str(venv) not in located or '"missing": []' not in located:
            raise SystemExit(f"check_wheel: the installed package is incomplete: {located}")

        printed = _run([str(bin_dir / "confide"), "--version"], cwd=work, env=env)
        if printed != f"confide, version {version}\n":
            raise SystemExit(f"check_wheel: confide --version printed {printed!r}")
        print(f"check_wheel: {printed.strip()}")

        demo = _run([str(bin_dir / "confide"), "demo"], cwd=work, env=env)
        if not demo.startswith("Confide demo on sqlite") or "memory_query" not in demo:
            raise SystemExit(f"check_wheel: confide demo printed an unexpected text:\n{demo}")
        print(f"check_wheel: confide demo ran from the wheel ({len(demo.splitlines())} lines)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
