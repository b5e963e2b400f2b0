"""An agent's category allowlist holds wherever memory reaches it: chat ``deliver`` and
``retrieve`` (SDK and HTTP) and a call's instructions over the Realtime socket, as it does in
``memory_query`` (both backends)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from tests.conftest import SCRIBE_CATEGORIES

from confide.client import Confide
from confide.config import Settings
from confide.engine import MemoryEngine
from confide.errors import PermissionDeniedError
from confide.server import create_app
from confide.types import MemoryType

ACCOUNT, USER = "acct-1", "ann"
ALLOWED = ("Porto", "green tea")
WITHHELD = ("dentist", "lonely")


@pytest.fixture
def scribe_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"categories_file": SCRIBE_CATEGORIES})


@pytest.fixture
def memory(engine: MemoryEngine, scribe_settings: Settings) -> Confide:
    sdk = Confide(engine, embedder=None, settings=scribe_settings)
    for text, kind in (
        ("Ann lives in Porto near the river", MemoryType.FACT),
        ("Ann drinks green tea every morning", MemoryType.PREFERENCE),
        ("Ann must call the dentist about her tooth", MemoryType.FOLLOW_UP),
        ("Ann feels lonely in the evenings", MemoryType.WELLBEING),
    ):
        [stored] = sdk.add(text, user_id=USER, account_id=ACCOUNT, type=kind)
        engine.update(stored.id, {"importance": 4}, account_id=ACCOUNT)
    return sdk


def _shows(text: str) -> tuple[list[str], list[str]]:
    return [w for w in ALLOWED if w in text], [w for w in WITHHELD if w in text]


QUESTION = "Porto tea dentist lonely evenings tooth morning"


def test_deliver_and_retrieve_carry_the_agents_categories_only(memory: Confide) -> None:
    prompt = memory.deliver("scribe", "hello", account_id=ACCOUNT, user_id=USER).system_prompt
    assert _shows(prompt) == (list(ALLOWED), [])
    history = memory.retrieve(
        QUESTION, account_id=ACCOUNT, user_id=USER, conversation_id="c1", agent="scribe"
    )
    shown = "\n".join(c.content for c in history.context_messages)
    assert _shows(shown) == (list(ALLOWED), [])
    # The default agent (every category) sees the rest: the query does reach them.
    everything = memory.retrieve(QUESTION, account_id=ACCOUNT, user_id=USER, conversation_id="c1")
    shown = "\n".join(c.content for c in everything.context_messages)
    assert _shows(shown)[1] == list(WITHHELD)
    with pytest.raises(PermissionDeniedError, match="no category allowlist"):
        memory.retrieve(QUESTION, account_id=ACCOUNT, user_id=USER, conversation_id="c1",
                        agent="stranger")  # fmt: skip


def test_http_retrieve_and_the_call_instructions_follow_the_keys_agent(
    memory: Confide, engine: MemoryEngine, scribe_settings: Settings
) -> None:
    app = create_app(scribe_settings, engine=engine)
    keys = app.state.services.keys
    scribe = {"Authorization": f"Bearer {keys.create(ACCOUNT, agents=['scribe'])}"}
    anyone = {"Authorization": f"Bearer {keys.create(ACCOUNT)}"}
    with TestClient(app) as client:
        path = "/v1/conversations/c1/retrieve"
        body = {"user_id": USER, "input": QUESTION}
        history = client.post(path, json=body, headers=scribe)
        assert history.status_code == 200
        shown = "\n".join(c["content"] for c in history.json()["contextMessages"])
        assert _shows(shown) == (list(ALLOWED), [])
        everything = client.post(path, json=body, headers=anyone).json()
        assert _shows("\n".join(c["content"] for c in everything["contextMessages"]))[1]
        refused = client.post(path, json={**body, "agent": "default"}, headers=scribe)
        assert refused.status_code == 403

        sid = client.post(
            "/sessions", json={"accountId": ACCOUNT, "lineId": USER}, headers=scribe
        ).json()["callSessionId"]
        with client.websocket_connect(f"/sessions/{sid}/realtime", headers=scribe) as socket:
            update = json.loads(socket.receive_text())
        instructions = update["session"]["instructions"]
        assert _shows(instructions) == (list(ALLOWED), [])
