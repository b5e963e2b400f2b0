"""PostgreSQL: ``CONFIDE_POSTGRES_EF_SEARCH`` reaches every pooled connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.config import Settings
from confide.storage import storage_from_settings
from confide.storage.migrations import HNSW_EF_SEARCH
from confide.storage.postgres import PostgresStorage
from confide.testing.postgres import EmbeddedPostgres


def test_the_configured_ef_search_is_set_on_pooled_connections(
    postgres_server: EmbeddedPostgres,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = postgres_server.temporary_database(request, template="confide_template")
    monkeypatch.setenv("CONFIDE_STORAGE_URL", url)
    monkeypatch.setenv("CONFIDE_POSTGRES_EF_SEARCH", "123")
    storage = storage_from_settings(Settings(home=tmp_path))
    assert isinstance(storage, PostgresStorage)
    try:
        with storage.transaction() as tx:
            assert tx.run("SHOW hnsw.ef_search").fetchone()[0] == "123"
    finally:
        storage.close()


def test_the_setting_and_the_store_default_to_the_same_value() -> None:
    assert Settings.model_fields["postgres_ef_search"].default == HNSW_EF_SEARCH == 128
