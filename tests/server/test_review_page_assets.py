"""The review page's three files and the fields it reads: nothing loaded from elsewhere, a
strict Content-Security-Policy on every file, no way for a value to become markup, and the
readable labels the page shows in the ``/v1`` answers."""

from __future__ import annotations

import re

import pytest
from tests.server.conftest import ACCOUNT, Api

from confide.conversation.extraction import ProposedChange
from confide.engine import MemoryEngine
from confide.types import MemoryType, NewMemory

pytestmark = pytest.mark.asyncio

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
# Ways a script turns a string into markup or code.
_HTML_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\("
    r"\s*[\"'](?:on|style|href|src)"
)


async def test_the_page_loads_nothing_from_elsewhere_and_never_parses_a_value(api: Api) -> None:
    bodies = {}
    for name in ("", "/app.js", "/app.css"):
        response = await api.client.get(f"/ui{name}")
        assert response.status_code == 200, name
        assert response.headers["Content-Security-Policy"] == CSP
        assert response.headers["Cache-Control"] == "no-store"
        bodies[name] = response.text
    html, script, style = bodies[""], bodies["/app.js"], bodies["/app.css"]
    assert re.findall(r'(?:src|href)="([^"]+)"', html) == ["/ui/app.css", "/ui/app.js"]
    assert "<style" not in html and " style=" not in html and "<script>" not in html
    assert not re.search(r"url\(|@import|https?:", style)
    assert not re.search(r"https?:|//[a-z]", re.sub(r"^\s*//.*$", "", script, flags=re.M))
    assert _HTML_SINKS.search(script) is None
    assert "textContent" in script


async def test_memories_and_proposals_carry_a_readable_label(
    api: Api, engine: MemoryEngine
) -> None:
    created = await api.post(
        "/v1/memories", {"user_id": "ann", "key": "dog_name", "value": "Biscuit"}
    )
    assert created.status_code == 201, created.text
    assert created.json()["label"] == "Dog name"
    engine.store(
        NewMemory(
            account_id=ACCOUNT,
            user_id="ann",
            key="subject_fact.other.d57bb208beaf",
            value="Her brother lives in Lyon",
            category="subject_fact",
        ),
        actor="seed",
    )
    listed = await api.client.get("/v1/memories", params={"user_id": "ann"}, headers=api.auth)
    labels = {m["key"]: m["label"] for m in listed.json()["memories"]}
    assert labels == {
        "dog_name": "Dog name",
        "subject_fact.other.d57bb208beaf": "Subject fact: other",
    }

    api.app.state.services.proposals.file(
        ProposedChange(
            account_id=ACCOUNT,
            user_id="ann",
            key="home_city",
            current_value=None,
            proposed_value="Braga",
            type=MemoryType.FACT,
            confidence=0.9,
            session_id="s-1",
        )
    )
    pending = await api.client.get("/v1/proposals", params={"user_id": "ann"}, headers=api.auth)
    assert [(p["key"], p["label"]) for p in pending.json()["proposals"]] == [
        ("home_city", "Home city")
    ]
