"""Provider selection from settings."""

from __future__ import annotations

import asyncio

import pytest

from confide.config import Settings
from confide.errors import ConfigurationError, ProviderError
from confide.llm import OpenAICompatibleLLM, llm_from_settings, provider_names, resolve_provider
from confide.llm.registry import XAI_BASE_URL, register_provider


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "XAI_API_KEY",
        "XAI_GROK_MODEL",
        "CONFIDE_LLM_BASE_URL",
        "CONFIDE_LLM_API_KEY",
        "CONFIDE_LLM_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)


def test_nothing_configured_means_no_llm() -> None:
    assert resolve_provider(Settings()) is None
    assert llm_from_settings(Settings()) is None


def test_xai_key_selects_xai_with_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAI_API_KEY", "xai-123")
    llm = llm_from_settings(Settings())
    assert isinstance(llm, OpenAICompatibleLLM)
    assert llm.model_id == "grok-3-fast"
    assert llm.base_url == XAI_BASE_URL + "/chat/completions"


def test_xai_model_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAI_API_KEY", "xai-123")
    monkeypatch.setenv("XAI_GROK_MODEL", "grok-4")
    llm = llm_from_settings(Settings())
    assert llm is not None and llm.model_id == "grok-4"


def test_base_url_wins_over_xai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XAI_API_KEY", "xai-123")
    monkeypatch.setenv("CONFIDE_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("CONFIDE_LLM_MODEL", "llama3")
    llm = llm_from_settings(Settings())
    assert isinstance(llm, OpenAICompatibleLLM)
    assert llm.model_id == "llama3"
    assert llm.base_url == "http://127.0.0.1:11434/v1/chat/completions"


def test_base_url_without_model_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFIDE_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigurationError, match="CONFIDE_LLM_MODEL"):
        llm_from_settings(Settings())


def test_explicit_xai_without_key_fails_per_call_as_provider_error() -> None:
    llm = llm_from_settings(Settings(), provider="xai")
    assert llm is not None
    with pytest.raises(ProviderError, match="key"):
        asyncio.run(llm.complete([], temperature=0.3, timeout=1.0))


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown LLM provider"):
        llm_from_settings(Settings(), provider="nope")


def test_registry_accepts_new_providers() -> None:
    def build(settings: Settings) -> OpenAICompatibleLLM:
        return OpenAICompatibleLLM(base_url="http://127.0.0.1:1/v1", model="custom")

    register_provider("custom-test", build)
    assert "custom-test" in provider_names()
    llm = llm_from_settings(Settings(), provider="custom-test")
    assert llm is not None and llm.model_id == "custom"
