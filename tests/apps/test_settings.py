"""The app-memory and usage settings read their documented environment variables."""

from __future__ import annotations

import pytest

from confide.config import LLMPrice, Settings
from confide.errors import ConfigurationError


def test_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFIDE_APP_MEMORY_CAP", "3")
    monkeypatch.setenv("CONFIDE_APP_LLM_TIMEOUT", "2.5")
    monkeypatch.setenv("CONFIDE_LLM_BUDGET_UNITS", "40")
    monkeypatch.setenv("CONFIDE_LLM_PRICES", '{"app_memory": {"per_call": 2}}')
    settings = Settings()
    assert settings.app_memory_cap == 3
    assert settings.app_llm_timeout == 2.5
    assert settings.llm_budget_units == 40
    assert settings.llm_prices == {"app_memory": LLMPrice(per_call=2)}


def test_defaults_and_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONFIDE_APP_MEMORY_CAP", "CONFIDE_LLM_BUDGET_UNITS", "CONFIDE_LLM_PRICES"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert (settings.app_memory_cap, settings.app_llm_timeout) == (10, 30.0)
    assert settings.llm_budget_units is None and settings.llm_prices == {}
    monkeypatch.setenv("CONFIDE_APP_MEMORY_CAP", "0")
    with pytest.raises(ConfigurationError, match=r"^invalid setting CONFIDE_APP_MEMORY_CAP: "):
        Settings()
