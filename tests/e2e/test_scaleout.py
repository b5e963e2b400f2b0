"""Scale-out under faults, small: three ``confide serve`` and two ``confide worker`` processes
on one PostgreSQL, mixed traffic spread over the services, and, while it runs, a user erased
over HTTP, the KEK rotated by ``confide keys rotate`` and a service and a worker killed with
SIGKILL and started again (``confide.testing.scaleout``; ``bench/scaleout.py`` runs it at
full size).

Every acknowledged write reads back, nothing ran twice, the apps hold exactly their cap, no
answer was a 5xx, every call was answered by the service that created it and refused (409)
by the others, and the erased user left no row and nothing to carve from the files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from confide.testing.postgres import EmbeddedPostgres, create_schema
from confide.testing.scaleout import ScaleoutOptions, run_scaleout


@pytest.mark.postgres
def test_many_processes_on_one_postgres_hold_under_erasure_rotation_and_kills(
    postgres_server: EmbeddedPostgres,
    keys_database: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    options = ScaleoutOptions(users=6, clients=3, ops=100, apps=2, app_cap=3)
    report = run_scaleout(
        options,
        storage_url=postgres_server.temporary_database(request, template="confide_template"),
        keystore_url=create_schema(keys_database),
        home=tmp_path / "home",
    )
    assert report.problems() == []
    assert report.processes == {"serve": 3, "worker": 2, "postgresql": 1}
    assert report.started == {"serve": 4, "worker": 3}
    assert len(report.faults) == 3 and not any("FAILED" in f for f in report.faults)
    # Enough of each kind was acknowledged, and read back as written.
    written = report.written
    assert written["memories"] >= 20 and written["chat messages"] >= 20
    assert written["app ends"] >= 2 * options.app_cap and written["calls"] >= 3
    assert report.read_back.memories >= 15 and report.read_back.lost == []
    assert report.read_back.forgotten_back == []
    # Nothing twice; the apps exactly at their cap.
    assert report.store.summaries >= 3
    assert report.store.overlapping_ranges == [] and report.store.extra_chunks == []
    assert report.store.app_ends_twice == [] and report.extracted_twice == []
    assert report.store.app_counts == {"app-0": 3, "app-1": 3}
    assert report.server_errors == {}
    # Calls: answered by their own service, refused with 409 everywhere else.
    assert report.calls["answered by their own service"] >= 3
    assert report.calls["refused with 409 elsewhere"] >= 3 and report.rule_broken == []
    # The erased user: no row in any table, nothing to carve from the files.
    assert report.erased_rows == {}
    assert report.residue_clean, report.residue
