"""/metrics through prometheus-client: every earlier metric name, per-route latency histograms
labelled by route template, and structured access logs without paths or values."""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.server.conftest import Api

from confide.server.logs import JsonFormatter

EARLIER_NAMES = {
    "confide_memories_stored",
    "confide_memories_updated",
    "confide_duplicates_skipped",
    "confide_refresh_failures",
    "confide_sessions_summarized",
    "confide_summarization_failures",
    "confide_integrity_failures",
    "confide_summarization_duration_seconds",
    "confide_memories_extracted_per_session",
}


@pytest.mark.asyncio
async def test_metrics_parse_and_time_each_route_by_template(api: Api) -> None:
    created = await api.client.post(
        "/v1/memories",
        json={"user_id": "ann", "key": "city", "value": "Lives in Porto"},
        headers=api.auth,
    )
    memory_id = created.json()["id"]
    assert (await api.client.get(f"/v1/memories/{memory_id}", headers=api.auth)).status_code == 200
    assert (await api.client.get("/no/such/thing")).status_code == 404
    response = await api.client.get("/metrics", headers=api.auth)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    assert set(families) >= EARLIER_NAMES | {"confide_http_request_duration_seconds"}
    stored = families["confide_memories_stored"].samples
    assert [(s.name, s.value) for s in stored] == [("confide_memories_stored_total", 1.0)]
    counts = {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for s in families["confide_http_request_duration_seconds"].samples
        if s.name.endswith("_count")
    }
    assert counts[("POST", "/v1/memories", "201")] == 1
    assert counts[("GET", "/v1/memories/{memory_id}", "200")] == 1
    assert counts[("GET", "unmatched", "404")] == 1
    assert memory_id not in response.text and "Porto" not in response.text


@pytest.mark.asyncio
async def test_access_log_is_structured_and_names_the_route_template(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="confide.access")
    await api.client.post(
        "/v1/memories",
        json={"user_id": "ann", "key": "pet", "value": "A cat named Tom"},
        headers=api.auth,
    )
    records = [r for r in caplog.records if r.name == "confide.access"]
    assert records
    line = json.loads(JsonFormatter().format(records[-1]))
    assert {k: line[k] for k in ("logger", "message", "method", "route", "status")} == {
        "logger": "confide.access",
        "message": "request",
        "method": "POST",
        "route": "/v1/memories",
        "status": 201,
    }
    assert isinstance(line["ms"], float) and "Tom" not in json.dumps(line)


def test_json_formatter_drops_fields_it_does_not_know() -> None:
    record = logging.LogRecord("confide.x", logging.WARNING, __file__, 1, "stored %d", (3,), None)
    record.value = "a secret value"
    record.route = "/v1/memories"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "stored 3" and line["route"] == "/v1/memories"
    assert "value" not in line and "a secret value" not in json.dumps(line)


def test_serve_offers_json_logs() -> None:
    from click.testing import CliRunner

    from confide.cli import main

    assert "--json-logs" in CliRunner().invoke(main, ["serve", "--help"]).output
