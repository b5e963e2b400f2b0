"""A store made by the release whose migrations shared one numbered list upgrades in place.

The fixtures (``tests/fixtures/stores``, made by ``make_numbered_release.py`` with that
release) hold its schema, its ``schema_migrations`` record of steps 1 to 24 and its data:
three memories of one user, their keys beside the data, a queued job. Opening such a store
maps the old record onto each feature's steps once, runs nothing else, and the memories read
back as they were written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES, Storage, open_storage
from confide.storage.keystore import open_key_store
from confide.storage.migrations import MEMORY_STORE
from confide.testing.postgres import EmbeddedPostgres
from confide.types import MemoryFilter, MemoryState

FIXTURES = Path(__file__).parents[1] / "fixtures" / "stores"
KEK = bytes(range(32))


def _released_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a database holding the release's store, restored from its dump."""
    dump = (FIXTURES / f"numbered_release.{backend}.sql").read_text()
    if backend == "sqlite":
        path = tmp_path / "confide.db"
        with sqlite3.connect(path) as db:
            db.executescript(dump)
        return f"sqlite:///{path}"
    import psycopg

    server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
    url = server.temporary_database(request)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(dump.encode())
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def released_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store the numbered-list release made, once per backend."""
    return _released_store(str(request.param), tmp_path, request)


@pytest.fixture
def upgraded(released_url: str) -> Iterator[Storage]:
    """The release's store opened (so migrated) by this version."""
    store = open_storage(released_url)
    try:
        yield store
    finally:
        store.close()


def _steps(store: Storage) -> list[tuple[str, int, str]]:
    with store.database.reader_across_accounts() as db:
        rows = db.run("SELECT feature, version, name FROM feature_migrations").fetchall()
    return sorted((str(r[0]), int(r[1]), str(r[2])) for r in rows)


def _every_step() -> list[tuple[str, int, str]]:
    return sorted(
        (feature.name, m.version, m.name)
        for feature in (MEMORY_STORE, *FEATURES)
        for m in feature.migrations
    )


def test_the_old_record_becomes_every_features_steps(upgraded: Storage) -> None:
    assert _steps(upgraded) == _every_step()
    latest = {f.name: len(f.migrations) for f in (MEMORY_STORE, *FEATURES)}
    assert upgraded.schema_versions() == latest
    assert "schema_migrations" not in _columns(upgraded)


def _columns(store: Storage) -> dict[str, list[str]]:
    """Every table's columns, in order."""
    if store.database.dialect == "sqlite":
        tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        with store.database.reader_across_accounts() as db:
            names = [str(r[0]) for r in db.run(tables).fetchall()]
            return {
                name: [str(r[1]) for r in db.run(f"PRAGMA table_info({name})").fetchall()]
                for name in names
            }
    found: dict[str, list[str]] = {}
    with store.database.reader_across_accounts() as db:
        rows = db.run(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        ).fetchall()
    for table, column in rows:
        found.setdefault(str(table), []).append(str(column))
    return found


def test_the_upgraded_tables_are_those_of_a_new_store(
    upgraded: Storage, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if upgraded.database.dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'new.db'}"
    else:
        server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
        url = server.temporary_database(request)
    new = open_storage(url)
    try:
        assert _columns(upgraded) == _columns(new)
    finally:
        new.close()


def test_the_mapping_runs_once_and_a_second_open_changes_nothing(
    upgraded: Storage, released_url: str
) -> None:
    before = _steps(upgraded)
    upgraded.migrate()
    again = open_storage(released_url)
    try:
        assert _steps(again) == before
    finally:
        again.close()


def test_the_releases_memories_read_back_and_new_writes_work(
    upgraded: Storage, released_url: str, tmp_path: Path
) -> None:
    keys = open_key_store(released_url)
    engine = MemoryEngine(
        upgraded,
        KeyRing(primary=KEK),
        settings=Settings(home=tmp_path / "home", encryption_key=KEK.hex()),
        key_store=keys,
    )
    try:
        flt = MemoryFilter(account_id="acme", user_id="ann")
        active = {m.key: m.value for m in engine.list_memories(flt)}
        assert active == {
            "dog_name": "The user's dog is called Biscuit",
            "tea": "The user likes jasmine tea",
        }
        forgotten = engine.list_memories(
            flt.model_copy(update={"states": (MemoryState.SOFT_DELETED,)})
        )
        assert [m.value for m in forgotten] == ["The user lives in Lyon"]
        engine.restore(forgotten[0].id, account_id="acme")
        new = engine.store(
            {"account_id": "acme", "user_id": "ann", "key": "sport", "value": "The user swims"}
        )
        assert engine.get(new.id, account_id="acme").value == "The user swims"
        assert len(engine.list_memories(flt)) == 4
    finally:
        engine.close()
        keys.close()
