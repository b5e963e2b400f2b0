"""Shared fixtures: a ``storage`` parametrised over SQLite and a real embedded PostgreSQL.

The suite's clock: ``TEST_CLOCK=2026-12-31T23:59:00Z pytest`` runs every test, and every
Python process a test starts, as if the wall clock read that instant when the run began; it
ticks on from there (``time_machine``), and monotonic clocks are untouched, so timeouts
keep their real length. ``make test-clocks`` runs the whole suite at a few such instants.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from tests.clock import clock_env

if "XDG_RUNTIME_DIR" not in os.environ:
    _runtime = tempfile.mkdtemp(prefix="confide-xdg-")
    atexit.register(shutil.rmtree, _runtime, True)
    os.environ["XDG_RUNTIME_DIR"] = _runtime

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.engine.lifecycle import EngineLifecycle
from confide.storage import FEATURES
from confide.storage.base import Capability, Storage
from confide.storage.keystore import KeyStore, open_key_store
from confide.storage.postgres import PostgresStorage
from confide.storage.sqlite import SqliteStorage
from confide.testing.postgres import EmbeddedPostgres, create_schema
from confide.types import ErasureReceipt

# The conformance suites' markers and their asserts rewritten into detailed failures; pytest's
# own tester, to run a backend's suite as its author would.
pytest_plugins = ["confide.testing.conformance", "pytester"]


def pytest_configure(config: pytest.Config) -> None:
    """Start the suite's clock at ``TEST_CLOCK`` (an ISO 8601 instant) when it is set."""
    value = os.environ.get("TEST_CLOCK")
    if not value:
        return
    instant = datetime.fromisoformat(value)
    if instant.tzinfo is None:
        raise pytest.UsageError(f"TEST_CLOCK needs a time zone (e.g. {value}Z), got {value!r}")
    os.environ.update(clock_env(os.environ, instant))
    time_machine.travel(instant, tick=True).start()


def pytest_report_header() -> str | None:
    """Say when the run's clock is not the machine's."""
    value = os.environ.get("TEST_CLOCK")
    return f"clock: started at TEST_CLOCK={value}" if value else None


BACKENDS = ("sqlite", "postgres")
TEST_KEK = bytes(range(32))
SCRIBE_CATEGORIES = Path(__file__).parent / "fixtures" / "scribe_categories.yaml"
"""A categories file whose agent ``scribe`` may read facts and preferences only."""


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[EmbeddedPostgres]:
    """One embedded PostgreSQL for the whole run, with a migrated template database."""
    # Retired WAL segments are deleted, not reused, so erasure can be checked in pg_wal too.
    server = EmbeddedPostgres(settings={"wal_recycle": "off"})
    template_uri = server.create_database("confide_template")
    storage = PostgresStorage(template_uri, features=FEATURES)
    storage.migrate()
    storage.close()
    try:
        yield server
    finally:
        server.stop()


def make_storage(url: str) -> Storage:
    """A migrated storage of the database at ``url``."""
    if url.startswith("sqlite:///"):
        sqlite = SqliteStorage(url.removeprefix("sqlite:///"), features=FEATURES)
        sqlite.migrate()
        return sqlite
    postgres = PostgresStorage(url, max_size=4, features=FEATURES)
    postgres.migrate()
    return postgres


@pytest.fixture(params=BACKENDS)
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database per test, once per backend: where ``storage`` (and the CLI) open it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'confide.db'}"
    server: EmbeddedPostgres = request.getfixturevalue("postgres_server")
    return server.temporary_database(request, template="confide_template")


@pytest.fixture
def storage(storage_url: str) -> Iterator[Storage]:
    """A fresh storage per test, once per backend."""
    store = make_storage(storage_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(autouse=True)
def _every_erasure_ends_verified(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every erasure a test makes in this process ends with its scrub finished: ``verified``
    by the erasure's own scan of the files, or ``scrubbed`` where this process cannot read
    them (never ``pending``), unless the test is marked ``erasure_may_pend``."""
    if request.node.get_closest_marker("erasure_may_pend"):
        return
    erase = EngineLifecycle.erase_user

    def checked(self: EngineLifecycle, **kwargs: Any) -> ErasureReceipt:
        receipt = erase(self, **kwargs)
        assert receipt.status != "pending", f"an erasure was left pending: {receipt.blocked_by}"
        if receipt.status == "verified":
            assert receipt.scan is not None and receipt.scan.clean
        return receipt

    monkeypatch.setattr(EngineLifecycle, "erase_user", checked)


@pytest.fixture(autouse=True)
def _required_capabilities(request: pytest.FixtureRequest) -> None:
    """Skip a test marked ``requires(Capability.X, ...)`` whose ``storage`` lacks one."""
    marker = request.node.get_closest_marker("requires")
    if marker is None:
        return
    store: Storage = request.getfixturevalue("storage")
    missing = [Capability(c) for c in marker.args if c not in store.capabilities]
    if missing:
        pytest.skip(f"the {store.name} storage lacks {', '.join(missing)}")


@pytest.fixture
def key_store_url(storage: Storage, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the test's key store lives: apart from ``storage``'s database, of the same kind."""
    if storage.name == "sqlite":
        return f"sqlite:///{tmp_path / 'keys.db'}"
    # One keys database for the run and a schema of its own per test (a database per test
    # would cost a CREATE DATABASE each).
    return create_schema(request.getfixturevalue("keys_database"))


@pytest.fixture(scope="session")
def keys_database(postgres_server: EmbeddedPostgres) -> str:
    """The database that holds the PostgreSQL tests' key stores."""
    return postgres_server.create_database("confide_keys")


@pytest.fixture
def key_store(key_store_url: str) -> Iterator[KeyStore]:
    """The user keys of ``storage``, kept apart from its data as deployments keep them."""
    store = open_key_store(key_store_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings pointing at a temporary home folder with a fixed key."""
    return Settings(home=tmp_path / "home", encryption_key=TEST_KEK.hex())


@pytest.fixture
def engine(storage: Storage, key_store: KeyStore, settings: Settings) -> Iterator[MemoryEngine]:
    """A memory engine over the parametrised storage, its keys in a separate key store; its
    operational events are written before the storage closes."""
    engine = MemoryEngine(
        storage, KeyRing(primary=TEST_KEK), settings=settings, key_store=key_store
    )
    yield engine
    # Otherwise its background writer wakes after the test, finds the store closed and
    # says it could not record them (printed when that happens after the last test).
    engine.ops.close()
