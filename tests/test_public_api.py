"""Meta-tests: the public API list, and no heavy vendor imports in core modules."""

from __future__ import annotations

import subprocess
import sys

import engram

EXPECTED = {
    "AsyncMemoryEngine",
    "ConflictError",
    "Engram",
    "EngramError",
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
    assert sorted(engram.__all__) == sorted(EXPECTED)
    for name in engram.__all__:
        assert getattr(engram, name) is not None


def test_core_import_stays_light() -> None:
    code = (
        "import sys, engram, engram.engine, engram.cli, engram.storage.sqlite;"
        "heavy = {'torch', 'sentence_transformers', 'onnxruntime', 'fastapi', 'psycopg'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_line_starts_without_numeric_or_model_runtimes() -> None:
    """``engram --help`` imports the CLI module: it must not pay for NumPy or a model."""
    code = (
        "import sys, engram.cli;"
        "heavy = {'numpy', 'numba', 'onnxruntime', 'tokenizers', 'torch'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_lazy_names_resolve_to_the_real_classes() -> None:
    from engram.client import Engram
    from engram.engine import MemoryEngine

    assert engram.MemoryEngine is MemoryEngine and engram.Engram is Engram
