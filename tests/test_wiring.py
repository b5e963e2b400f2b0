"""``confide.wiring.build`` is the one wiring: the SDK, the HTTP app, MCP, the worker and the
CLI take the same pieces from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from confide.chat.summaries import LLMSummariser
from confide.cli import main
from confide.client import Confide
from confide.config import Settings
from confide.conversation.extraction import LLMExtractor
from confide.engine import MemoryEngine
from confide.index.vectors import VectorIndexer
from confide.llm.offline import OfflineExtractor
from confide.llm.usage import MeteredLLM
from confide.mcp_server import open_services
from confide.server import create_app
from confide.testing.embedders import HashingEmbedder
from confide.types import MemoryFilter
from confide.wiring import build

KEK = bytes(range(32)).hex()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An environment that configures Confide for the CLI and ``Settings()`` alike."""
    for name in (
        "XAI_API_KEY",
        "CONFIDE_LLM_API_KEY",
        "CONFIDE_STORAGE_URL",
        "CONFIDE_KEYSTORE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CONFIDE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMORY_ENCRYPTION_KEY", KEK)
    monkeypatch.setenv("CONFIDE_EMBEDDER", "none")
    monkeypatch.setenv("CONFIDE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CONFIDE_LLM_MODEL", "scripted")
    return tmp_path / "home"


def test_open_wires_the_configured_llm_extractor(home: Path) -> None:
    with Confide.open(Settings()) as confide:
        assert isinstance(confide.extractor, LLMExtractor)
        assert confide.memory_query.embedder is None


def test_open_meters_every_llm_client_once(home: Path) -> None:
    with Confide.open(Settings()) as confide:
        apps_llm = confide.apps.llm
        assert isinstance(apps_llm, MeteredLLM) and apps_llm.ledger is confide.usage
        assert confide.apps.compactor.llm is apps_llm
        assert isinstance(confide.extractor, LLMExtractor)
        assert confide.extractor._llm is apps_llm
        summariser = confide.chat.summaries.summariser
        assert isinstance(summariser, LLMSummariser) and summariser.llm is apps_llm
        assert confide.chat.ledger is confide.usage


def test_without_an_llm_extraction_is_offline(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONFIDE_LLM_BASE_URL")
    with Confide.open(Settings()) as confide:
        assert isinstance(confide.extractor, OfflineExtractor)


def test_the_app_takes_its_extractor_from_the_wiring(home: Path) -> None:
    app = create_app(Settings())
    assert app.state.services.summarizer.extractor_name == "llm"
    app.state.services.engine.close()


def test_a_key_made_by_the_cli_opens_the_app_the_wiring_builds(home: Path) -> None:
    created = CliRunner().invoke(main, ["keys", "create", "--account", "acme"])
    assert created.exit_code == 0, created.output
    token = created.output.strip().splitlines()[-1]
    with TestClient(create_app(Settings())) as client:  # the lifespan closes the engine
        ok = client.get("/v1/memories", params={"user_id": "u1"}, headers=_bearer(token))
        refused = client.get("/v1/memories", params={"user_id": "u1"}, headers=_bearer("x"))
    assert ok.status_code == 200, ok.text
    assert refused.status_code == 401


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_service_runs_on_the_sdks_components_with_one_metered_llm(home: Path) -> None:
    app = create_app(Settings())
    services, sdk = app.state.services, app.state.services.sdk
    try:
        assert sdk is not None and sdk.components is services.components
        assert isinstance(services.metered_llm, MeteredLLM)
        # One ledger and one metered client: nothing is wrapped twice.
        assert services.usage is sdk.usage is services.metered_llm.ledger
        assert not isinstance(services.metered_llm.llm, MeteredLLM)
        assert services.chat is sdk.chat and services.apps is sdk.apps
        assert services.apps.llm is services.metered_llm
        assert services.gate is services.components.gate
        assert services.gate.dispatcher is services.dispatcher
    finally:
        services.close()


def test_a_service_over_a_given_engine_is_built_the_same_way(home: Path) -> None:
    engine = MemoryEngine.open(Settings())
    try:
        services = create_app(engine.settings, engine=engine).state.services
        assert services.sdk is not None and services.sdk.components is services.components
        assert services.components.query is not None  # memory_query, lexical without vectors
        assert services.usage is services.sdk.usage
        services.close()
        # A given engine is the caller's to close: it still answers.
        assert engine.list_memories(MemoryFilter(account_id="a", user_id="u"), limit=1) == []
    finally:
        engine.close()


def test_two_clients_over_one_engine_index_each_memory_once(home: Path) -> None:
    engine = MemoryEngine.open(Settings())
    embedder = HashingEmbedder(dims=64)
    first = Confide(engine, embedder=embedder)
    Confide(engine, embedder=embedder)
    build(engine=engine, embedder=embedder)
    assert sum(isinstance(i, VectorIndexer) for i in engine.indexers) == 1
    first.close()


def test_mcp_and_the_worker_take_the_clients_components(home: Path) -> None:
    with Confide.open(Settings()) as confide:
        services = open_services(confide)
        assert services.components is confide.components
        assert services.usage is confide.usage and services.chat is confide.chat
        worker = confide.components.worker()
        assert worker.engine is confide.engine
