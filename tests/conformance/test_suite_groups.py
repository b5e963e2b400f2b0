"""The conformance suites are grouped as storage is: the database, the memory store, and one
suite per feature that keeps tables."""

from __future__ import annotations

from confide.storage import FEATURES
from confide.testing import conformance
from confide.testing.conformance import (
    ALL_SUITES,
    FEATURE_SUITES,
    DatabaseConformance,
    MemoryStoreConformance,
    StorageConformance,
)


def test_every_feature_has_a_suite_and_every_backend_runs_it() -> None:
    assert set(FEATURE_SUITES) == {feature.name for feature in FEATURES}
    suites: list[type] = [DatabaseConformance, MemoryStoreConformance, *FEATURE_SUITES.values()]
    for suite in suites:
        assert issubclass(StorageConformance, suite)


def test_all_suites_lists_each_exported_suite_once() -> None:
    groups = {
        "DatabaseConformance",
        "MemoryStoreConformance",
        "ServiceConformance",
        "JobsConformance",
        "StorageConformance",
    }
    exported = {
        name for name in conformance.__all__ if name.endswith("Conformance") and name not in groups
    }
    assert sorted(s.__name__ for s in ALL_SUITES) == sorted(exported)
