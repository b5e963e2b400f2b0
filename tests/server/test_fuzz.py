"""Schema-driven hostile requests (schemathesis) against every route, on both backends: no
5xx, every 4xx a JSON error that names its problem, the service answering afterwards."""

from __future__ import annotations

from confide.config import Settings
from confide.engine import MemoryEngine
from confide.testing.fuzz import fuzz_app
from confide.testing.isolation import isolation_service

CASES = 300
"""Cases of the bounded run (``bench/fuzz.py`` sends at least 5,000)."""


def test_every_route_answers_hostile_requests_clearly(
    engine: MemoryEngine, settings: Settings
) -> None:
    with isolation_service(engine, settings) as service:
        token = service.app.state.services.keys.create("acct-fuzz", admin=True)
        report = fuzz_app(service, token, cases_per_operation=5)
    assert report.problems == []
    assert report.cases >= CASES
    assert report.operations >= 40  # every route of the schema
    assert not any(status >= 500 for status in report.statuses)
    print(f"fuzz: {report.cases} cases, {report.operations} operations, {dict(report.statuses)}")
