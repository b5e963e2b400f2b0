"""Per-app monitoring on /metrics: memories created, cap utilisation and context injections,
labelled by app id (a bounded set), fed by the app memories beneath the routes; no account,
user or text in them (both backends)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.apps.conftest import ACCOUNT, ApiFactory, AppsApi, transcript

from confide.server.metrics import OTHER_APPS, Metrics


async def _families(api: AppsApi) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    response = await api.client.get("/metrics", headers=api.headers())
    assert response.status_code == 200
    text = response.text
    for secret in (ACCOUNT, "option", "report"):
        assert secret not in text  # no account, no memory text
    return {
        f.name: [(s.name, s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


async def _end(api: AppsApi, app_id: str, n: int) -> None:
    response = await api.end(app_id, f"c{n}", {"messages": transcript(n)})
    assert response.status_code == 202, response.text
    await api.join()  # one at a time: each write sees the scope the one before left


@pytest.mark.asyncio
async def test_creation_cap_utilisation_and_context_injection_per_app(
    apps_api: ApiFactory,
) -> None:
    async with apps_api(app_memory_cap=2) as api:
        empty = await api.client.get("/v1/apps/notes/context", headers=api.headers())
        assert empty.json()["content"] == ""
        for n in range(3):
            await _end(api, "notes", n)
        await _end(api, "mail", 0)
        for _ in range(2):
            await api.client.get("/v1/apps/notes/context", headers=api.headers())
        families = await _families(api)
    created = {s[1]["app"]: s[2] for s in families["confide_app_memories_created"]}
    assert created == {"notes": 3.0, "mail": 1.0}
    # After each write and compaction: notes at 1/2, then 2/2 twice (the cap holds); mail 1/2.
    buckets = {
        (labels["app"], labels["le"]): value
        for name, labels, value in families["confide_app_cap_utilisation"]
        if name.endswith("_bucket")
    }
    assert buckets[("notes", "0.25")] == 0.0
    assert buckets[("notes", "0.5")] == 1.0
    assert buckets[("notes", "0.9")] == 1.0
    assert buckets[("notes", "1")] == 3.0
    assert buckets[("mail", "0.5")] == 1.0
    sums = {
        labels["app"]: value
        for name, labels, value in families["confide_app_cap_utilisation"]
        if name.endswith("_sum")
    }
    assert sums == {"notes": 2.5, "mail": 0.5}
    contexts = {
        (labels["app"], labels["injected"]): value
        for _, labels, value in families["confide_app_context_requests"]
    }
    assert contexts == {("notes", "false"): 1.0, ("notes", "true"): 2.0}
    injected = {s[1]["app"]: s[2] for s in families["confide_app_context_memories"]}
    assert injected == {"notes": 4.0}


@pytest.mark.asyncio
async def test_the_app_label_is_bounded(apps_api: ApiFactory) -> None:
    async with apps_api(metrics_app_labels=2) as api:
        for app_id in ("a1", "a2", "a3", "a4"):
            await api.client.get(f"/v1/apps/{app_id}/context", headers=api.headers())
        await api.client.get("/v1/apps/a1/context", headers=api.headers())
        families = await _families(api)
    contexts = {s[1]["app"]: s[2] for s in families["confide_app_context_requests"]}
    assert contexts == {"a1": 2.0, "a2": 1.0, OTHER_APPS: 2.0}


def test_no_app_label_at_all_when_the_bound_is_zero() -> None:
    metrics = Metrics(app_labels=0)
    metrics.app_memory_created("notes")
    metrics.app_context_served("notes", memories=0)
    metrics.app_cap_used("notes", held=1, cap=4)
    rendered = metrics.render()
    assert "notes" not in rendered
    assert f'confide_app_memories_created_total{{app="{OTHER_APPS}"}} 1.0' in rendered
