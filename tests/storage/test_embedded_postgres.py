"""The test and bench PostgreSQL server: parameters set at start survive as configured."""

from __future__ import annotations

import pytest

from confide.testing.postgres import EmbeddedPostgres


def _show(server: EmbeddedPostgres, name: str) -> str:
    lines = [line.strip() for line in server.psql(f"SHOW {name};").splitlines()]
    return lines[2]  # header, rule, value


def test_settings_apply_with_a_restart_only_where_needed() -> None:
    server = EmbeddedPostgres(settings={"shared_buffers": "64MB", "work_mem": "8MB"})
    try:
        assert _show(server, "shared_buffers") == "64MB"  # needs a restart
        assert _show(server, "work_mem") == "8MB"  # a reload is enough
        server.configure({"work_mem": "16MB"})
        assert _show(server, "work_mem") == "16MB"
        assert _show(server, "shared_buffers") == "64MB"
        # A parameter name is never spliced into SQL.
        with pytest.raises(ValueError, match="parameter name"):
            server.configure({"work_mem = '1MB'; DROP TABLE x; --": "1"})
        assert _show(server, "work_mem") == "16MB"
    finally:
        server.stop()
