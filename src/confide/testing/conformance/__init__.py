"""The storage conformance suite: what every Confide backend must do, as plain pytest classes.

The suites are grouped as storage is: :class:`DatabaseConformance` (the database seam: one
connection per transaction, row-level security, migrations), :class:`MemoryStoreConformance`
(the memory store the engine writes and searches) and one suite per feature that keeps
tables (:data:`FEATURE_SUITES`, by feature name). A backend proves itself by subclassing
:class:`StorageConformance` (all of them) or a few of the groups or suites, and saying where
a fresh store lives::

    # conftest.py at the root of the backend's tests
    pytest_plugins = ["confide.testing.conformance"]

    # test_my_backend.py
    from confide.testing.conformance import StorageConformance

    class TestMyBackend(StorageConformance):
        def new_storage_url(self, folder, request):
            return f"mine:///{folder / 'confide.db'}"  # a scheme given to register_backend

The plugin line registers the ``requires`` and ``slow`` markers (so ``--strict-markers``
accepts them) and lets pytest rewrite the suites' asserts into detailed failures. A test
marked ``@pytest.mark.requires(Capability.X)`` is skipped on a backend whose
``capabilities`` lack ``X``. The suites need pytest and Hypothesis (Confide's ``test`` extra).
"""

from __future__ import annotations

import pytest

from confide.testing.conformance.apps import AppsConformance
from confide.testing.conformance.at_rest import AtRestConformance
from confide.testing.conformance.audit import AuditConformance
from confide.testing.conformance.audit_trail import AuditTrailConformance
from confide.testing.conformance.blind_keys import BlindKeysConformance
from confide.testing.conformance.blind_keys_upgrade import BlindKeysUpgradeConformance
from confide.testing.conformance.call_sessions import CallSessionsConformance
from confide.testing.conformance.chat import ChatConformance
from confide.testing.conformance.checkpoints import CheckpointsConformance
from confide.testing.conformance.concurrent_writes import ConcurrentWritesConformance
from confide.testing.conformance.consolidation import ConsolidationConformance
from confide.testing.conformance.erasure import ErasureConformance
from confide.testing.conformance.erasure_derived import DerivedErasureConformance
from confide.testing.conformance.harness import TEST_KEK, StorageHarness
from confide.testing.conformance.index_snapshots import IndexSnapshotsConformance
from confide.testing.conformance.index_versions import IndexVersionsConformance
from confide.testing.conformance.insights import InsightsConformance
from confide.testing.conformance.jobs import JobQueueConformance, WorkerConformance
from confide.testing.conformance.key_lifecycle import KeyLifecycleConformance
from confide.testing.conformance.lifecycle_jobs import LifecycleJobsConformance
from confide.testing.conformance.memories import MemoriesConformance
from confide.testing.conformance.memory_query import MemoryQueryConformance
from confide.testing.conformance.migrations import MigrationsConformance
from confide.testing.conformance.multifact import MultiFactConformance
from confide.testing.conformance.privacy import PrivacyConformance
from confide.testing.conformance.row_security import RowSecurityConformance
from confide.testing.conformance.scrubs import ScrubsConformance
from confide.testing.conformance.sealed_vectors import SealedVectorsConformance
from confide.testing.conformance.search_primitives import SearchPrimitivesConformance
from confide.testing.conformance.service_isolation import ServiceIsolationConformance
from confide.testing.conformance.single_connection import SingleConnectionConformance
from confide.testing.conformance.stateful import StatefulConformance
from confide.testing.conformance.tamper import TamperConformance

__all__ = [
    "ALL_SUITES",
    "FEATURE_SUITES",
    "MARKERS",
    "TEST_KEK",
    "AppsConformance",
    "AtRestConformance",
    "AuditConformance",
    "AuditTrailConformance",
    "BlindKeysConformance",
    "BlindKeysUpgradeConformance",
    "CallSessionsConformance",
    "ChatConformance",
    "CheckpointsConformance",
    "ConcurrentWritesConformance",
    "ConsolidationConformance",
    "DatabaseConformance",
    "DerivedErasureConformance",
    "ErasureConformance",
    "IndexSnapshotsConformance",
    "IndexVersionsConformance",
    "InsightsConformance",
    "JobQueueConformance",
    "JobsConformance",
    "KeyLifecycleConformance",
    "LifecycleJobsConformance",
    "MemoriesConformance",
    "MemoryQueryConformance",
    "MemoryStoreConformance",
    "MigrationsConformance",
    "MultiFactConformance",
    "PrivacyConformance",
    "RowSecurityConformance",
    "ScrubsConformance",
    "SealedVectorsConformance",
    "SearchPrimitivesConformance",
    "ServiceConformance",
    "ServiceIsolationConformance",
    "SingleConnectionConformance",
    "StatefulConformance",
    "StorageConformance",
    "StorageHarness",
    "TamperConformance",
    "WorkerConformance",
]

MARKERS = (
    "requires(*capabilities): skip unless the storage has these confide.storage.Capability members",
    "slow: loads the local embedding model",
)
"""The markers the suites use, as ``pytest_configure`` registers them."""


class DatabaseConformance(
    SingleConnectionConformance,
    RowSecurityConformance,
    MigrationsConformance,
):
    """The database seam: one connection per transaction, the database confining each
    account's rows, migrations recorded per feature and repeatable."""


class MemoryStoreConformance(
    MemoriesConformance,
    AuditConformance,
    AuditTrailConformance,
    PrivacyConformance,
    AtRestConformance,
    SealedVectorsConformance,
    IndexSnapshotsConformance,
    TamperConformance,
    BlindKeysConformance,
    BlindKeysUpgradeConformance,
    ConcurrentWritesConformance,
    ErasureConformance,
    IndexVersionsConformance,
    KeyLifecycleConformance,
    MemoryQueryConformance,
    MultiFactConformance,
    SearchPrimitivesConformance,
    StatefulConformance,
):
    """The memory store: rows, versions, audit, encryption at rest, the search index, keys
    and erasure, as the engine uses them."""


class ServiceConformance(CallSessionsConformance, ServiceIsolationConformance):
    """The service feature: call sessions, API keys and proposals."""


class JobsConformance(
    JobQueueConformance, WorkerConformance, LifecycleJobsConformance, InsightsConformance
):
    """The jobs feature: the queue, its leases, and the jobs the worker runs from it."""


FEATURE_SUITES: dict[str, type[StorageHarness]] = {
    "service": ServiceConformance,
    "chat": ChatConformance,
    "apps": AppsConformance,
    "checkpoints": CheckpointsConformance,
    "jobs": JobsConformance,
    "consolidation": ConsolidationConformance,
    "scrubs": ScrubsConformance,
    "derived": DerivedErasureConformance,
}
"""One suite per feature of :data:`confide.storage.FEATURES`, by the feature's name."""


class StorageConformance(
    DatabaseConformance,
    MemoryStoreConformance,
    ServiceConformance,
    ChatConformance,
    AppsConformance,
    CheckpointsConformance,
    JobsConformance,
    ConsolidationConformance,
    ScrubsConformance,
    DerivedErasureConformance,
):
    """Every suite: the database's, the memory store's and each feature's. Subclass it and
    say where stores live."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the suites' markers (this module is a pytest plugin; see the docstring)."""
    for line in MARKERS:
        config.addinivalue_line("markers", line)


_GROUPS = (DatabaseConformance, MemoryStoreConformance, ServiceConformance, JobsConformance)

ALL_SUITES: tuple[type[StorageHarness], ...] = tuple(
    suite
    for member in StorageConformance.__bases__
    for suite in (member.__bases__ if member in _GROUPS else (member,))
)
"""Every suite, each a :class:`StorageHarness` subclass (those :class:`StorageConformance`
gathers, its groups opened)."""
