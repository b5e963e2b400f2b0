"""Meta-tests: the public API list, and no heavy vendor imports in core modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import confide

EXPECTED = {
    "AddResult",
    "AsyncConfide",
    "AsyncMemoryEngine",
    "ConflictError",
    "Confide",
    "ConfideError",
    "HistoryEvent",
    "HistoryEventType",
    "IntegrityError",
    "Memory",
    "MemoryEngine",
    "MemoryFilter",
    "MemoryPatch",
    "MemoryState",
    "MemoryType",
    "NewMemory",
    "NotFoundError",
    "PermissionDeniedError",
    "SearchResult",
    "Settings",
    "Source",
    "ValidationError",
    "Visibility",
}


def test_public_api_is_pinned() -> None:
    assert sorted(confide.__all__) == sorted(EXPECTED)
    for name in confide.__all__:
        assert getattr(confide, name) is not None


def test_core_import_stays_light() -> None:
    code = (
        "import sys, confide, confide.engine, confide.cli, confide.storage.sqlite;"
        "heavy = {'torch', 'sentence_transformers', 'onnxruntime', 'fastapi', 'psycopg'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _test_framework_imports(path: Path) -> list[str]:
    """The pytest and Hypothesis modules ``path`` imports, at top level or inside functions."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return [name for name in names if name.split(".")[0] in {"pytest", "_pytest", "hypothesis"}]


def test_only_the_test_helpers_import_test_frameworks() -> None:
    """pytest and Hypothesis are no dependency of Confide: only ``confide.testing`` uses them."""
    package = Path(confide.__file__).parent
    found = {
        str(path.relative_to(package)): _test_framework_imports(path)
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "testing"
    }
    assert len(found) > 50
    assert {path: names for path, names in found.items() if names} == {}
    # The same search finds them where they are used.
    assert _test_framework_imports(package / "testing" / "conformance" / "harness.py")


def test_the_command_line_starts_without_numeric_or_model_runtimes() -> None:
    """``confide --help`` imports the CLI module: it must not pay for NumPy or a model."""
    code = (
        "import sys, confide.cli;"
        "heavy = {'numpy', 'numba', 'onnxruntime', 'tokenizers', 'torch'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_lazy_names_resolve_to_the_real_classes() -> None:
    from confide.client import Confide
    from confide.engine import MemoryEngine

    assert confide.MemoryEngine is MemoryEngine and confide.Confide is Confide
