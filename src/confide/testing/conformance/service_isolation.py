"""Random traffic over the HTTP service on each backend: nothing leaks between accounts or
users, nothing forgotten is read back, versions only grow (see :mod:`confide.testing.isolation`).
"""

from __future__ import annotations

import logging

import pytest

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.storage.base import Capability, Storage
from confide.testing.conformance.harness import StorageHarness

SERVICE_STEPS = 2_000
"""Steps of the bounded run (``bench/isolation.py`` runs ten times as many)."""


class ServiceIsolationConformance(StorageHarness):
    """The isolation machine over the service (needs Confide's ``server`` extra)."""

    def test_random_service_traffic_keeps_tenants_apart(
        self,
        engine: MemoryEngine,
        settings: Settings,
        storage: Storage,
        storage_url: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        from confide.testing.forensics import logical_dumps
        from confide.testing.isolation import isolation_service, markers_in_clear, run_isolation

        caplog.set_level(logging.DEBUG)  # every log line, access lines included
        with isolation_service(engine, settings) as service:
            report = run_isolation(service, min_steps=SERVICE_STEPS)
        assert report.violations == []
        assert report.steps >= SERVICE_STEPS
        # Sentinels: no value, message or proposal written by the run is in clear in the
        # database's files (WAL included), in a pg_dump of it or in what was logged.
        files = storage.data_files() if Capability.DATA_FILES in storage.capabilities else []
        dumps = logical_dumps(storage_url)
        assert markers_in_clear(report, files, caplog.text, dumps) == []
        assert report.markers and (files or Capability.DATA_FILES not in storage.capabilities)
        print(f"isolation: {report.steps} steps, {report.requests} requests, 0 violations")
