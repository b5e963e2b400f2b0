"""The fixtures every conformance suite runs on, and the one thing a backend must say."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from confide.config import Settings
from confide.crypto.keyring import KeyRing
from confide.engine import MemoryEngine
from confide.storage import FEATURES, open_storage
from confide.storage.base import Capability, Storage
from confide.storage.keystore import KeyStore, open_key_store
from confide.storage.migrations import MEMORY_STORE

TEST_KEK = bytes(range(32))


def latest_versions() -> dict[str, int]:
    """The newest step of the memory store and of each feature :func:`open_storage` keeps."""
    return {f.name: len(f.migrations) for f in (MEMORY_STORE, *FEATURES)}


def unrecord_steps(
    storage: Storage, feature: str, *, version: int, and_later: bool = False
) -> None:
    """Forget that a feature's step (``and_later``: and every later one) ran, as a store made
    before it has it; the next :meth:`Storage.migrate` runs it (again)."""
    where = "feature = ? AND version >= ?" if and_later else "feature = ? AND version = ?"
    with storage.database.transaction() as tx:
        tx.across_accounts()
        tx.run(f"DELETE FROM feature_migrations WHERE {where}", [feature, version])


"""The key-encryption key of the ``engine`` fixture and of ``settings``."""


def other_process(
    storage_url: str, key_store_url: str, settings: Settings, request: pytest.FixtureRequest
) -> MemoryEngine:
    """An engine with connections of its own to the same data and key store, as another
    process would have (closed when the test ends)."""
    engine = MemoryEngine(
        open_storage(storage_url),
        KeyRing(primary=TEST_KEK),
        settings=settings,
        key_store=open_key_store(key_store_url),
    )
    request.addfinalizer(engine.close)
    return engine


class StorageHarness:
    """Fixtures for the conformance suites; a backend subclass says where its stores live.

    A backend overrides :meth:`new_storage_url` (and, to keep keys in a store of its own
    kind, :meth:`new_key_store_url`). The URL's scheme must open with
    :func:`confide.storage.open_storage` (see :func:`confide.storage.register_backend`), since
    some suites open a second connection to the same store, as another process would.

    The fixtures it gives every test: ``storage_url``, ``storage`` (opened and migrated),
    ``key_store_url``, ``key_store``, ``settings`` and ``engine`` (over ``storage``, its keys
    in ``key_store``, :data:`TEST_KEK` as the KEK). A test marked
    ``@pytest.mark.requires(Capability.X, ...)`` is skipped when ``storage`` lacks one of
    them.
    """

    def new_storage_url(self, folder: Path, request: pytest.FixtureRequest) -> str:
        """The URL of a fresh, empty store (it need not exist yet; it is migrated on open).

        Args:
            folder: an empty folder the store may use for its files.
            request: the requesting fixture's request, to reach other fixtures such as a
                database server.
        """
        raise NotImplementedError(f"{type(self).__name__} must say where a fresh store lives")

    def new_key_store_url(self, folder: Path, request: pytest.FixtureRequest) -> str:
        """The URL of a fresh key store, apart from the data; a SQLite file unless overridden.

        Args:
            folder: an empty folder the key store may use for its files.
            request: the requesting fixture's request.
        """
        return f"sqlite:///{folder / 'keys.db'}"

    @pytest.fixture
    def storage_url(self, tmp_path: Path, request: pytest.FixtureRequest) -> str:
        """Where this test's fresh store lives."""
        folder = tmp_path / "data"
        folder.mkdir()
        return self.new_storage_url(folder, request)

    @pytest.fixture
    def storage(self, storage_url: str) -> Iterator[Storage]:
        """This test's store, open and migrated; closed after the test."""
        store = open_storage(storage_url, pool_max=4)
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def key_store_url(self, tmp_path: Path, request: pytest.FixtureRequest) -> str:
        """Where this test's key store lives, apart from ``storage``."""
        folder = tmp_path / "keys"
        folder.mkdir()
        return self.new_key_store_url(folder, request)

    @pytest.fixture
    def key_store(self, key_store_url: str) -> Iterator[KeyStore]:
        """The user keys of ``storage``, kept apart from its data as deployments keep them."""
        store = open_key_store(key_store_url)
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def settings(self, tmp_path: Path) -> Settings:
        """Settings with a temporary home folder and :data:`TEST_KEK` as the key."""
        return Settings(home=tmp_path / "home", encryption_key=TEST_KEK.hex())

    @pytest.fixture
    def engine(
        self, storage: Storage, key_store: KeyStore, settings: Settings
    ) -> Iterator[MemoryEngine]:
        """A memory engine over ``storage``, its keys in ``key_store``; its operational
        events are written (and its writer thread stopped) before ``storage`` closes."""
        engine = MemoryEngine(
            storage, KeyRing(primary=TEST_KEK), settings=settings, key_store=key_store
        )
        yield engine
        engine.ops.close()

    @pytest.fixture(autouse=True)
    def _required_capabilities(self, request: pytest.FixtureRequest) -> None:
        """Skip a test marked ``requires(Capability.X, ...)`` whose ``storage`` lacks one."""
        marker = request.node.get_closest_marker("requires")
        if marker is None:
            return
        store: Storage = request.getfixturevalue("storage")
        missing = [Capability(c) for c in marker.args if c not in store.capabilities]
        if missing:
            pytest.skip(f"the {store.name} storage lacks {', '.join(missing)}")
