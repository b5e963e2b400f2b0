"""Random traffic over the HTTP service on each backend: nothing leaks between accounts or
users, nothing forgotten is read back, versions only grow (see :mod:`engram.testing.isolation`).
"""

from __future__ import annotations

from engram.config import Settings
from engram.engine import MemoryEngine
from engram.testing.conformance.harness import StorageHarness

SERVICE_STEPS = 2_000
"""Steps of the bounded run (``bench/isolation.py`` runs ten times as many)."""


class ServiceIsolationConformance(StorageHarness):
    """The isolation machine over the service (needs Engram's ``server`` extra)."""

    def test_random_service_traffic_keeps_tenants_apart(
        self, engine: MemoryEngine, settings: Settings
    ) -> None:
        from engram.testing.isolation import isolation_service, run_isolation

        with isolation_service(engine, settings) as service:
            report = run_isolation(service, min_steps=SERVICE_STEPS)
        assert report.violations == []
        assert report.steps >= SERVICE_STEPS
        print(f"isolation: {report.steps} steps, {report.requests} requests, 0 violations")
