"""Every conformance suite on the embedded PostgreSQL, its keys in a database of their own.

Each test gets a database copied from the migrated template, and a schema of its own in the
run's keys database (a database per test would cost a CREATE DATABASE each).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.testing.conformance import StorageConformance
from confide.testing.postgres import EmbeddedPostgres, create_schema


class TestPostgres(StorageConformance):
    def new_storage_url(self, folder: Path, request: pytest.FixtureRequest) -> str:
        server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
        return server.temporary_database(request, template="confide_template")

    def new_key_store_url(self, folder: Path, request: pytest.FixtureRequest) -> str:
        keys_database: str = request.getfixturevalue("keys_database")
        return create_schema(keys_database)
