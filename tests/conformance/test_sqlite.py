"""Every conformance suite on SQLite, its keys in a SQLite file of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.testing.conformance import StorageConformance


class TestSqlite(StorageConformance):
    def new_storage_url(self, folder: Path, request: pytest.FixtureRequest) -> str:
        return f"sqlite:///{folder / 'confide.db'}"
