"""Choose the LLM provider from settings through a small registry of named factories.

Resolution order (first match wins):

1. ``CONFIDE_LLM_BASE_URL`` set: the ``openai`` provider at that URL, with
   ``CONFIDE_LLM_API_KEY`` and ``CONFIDE_LLM_MODEL``.
2. ``XAI_API_KEY`` set: the ``xai`` provider (``https://api.x.ai/v1``, model from
   ``XAI_GROK_MODEL``).
3. Otherwise no LLM: callers fall back to the offline extractor.
"""

from __future__ import annotations

from collections.abc import Callable

from confide.config import Settings
from confide.errors import ConfigurationError
from confide.llm.base import LLM
from confide.llm.openai_compat import OpenAICompatibleLLM

__all__ = [
    "XAI_BASE_URL",
    "LLMFactory",
    "llm_from_settings",
    "provider_names",
    "register_provider",
    "resolve_provider",
]

XAI_BASE_URL = "https://api.x.ai/v1"

LLMFactory = Callable[[Settings], LLM]

_PROVIDERS: dict[str, LLMFactory] = {}


def register_provider(name: str, factory: LLMFactory) -> None:
    """Register (or replace) the factory that builds provider ``name`` from settings."""
    _PROVIDERS[name] = factory


def provider_names() -> tuple[str, ...]:
    """Names of the registered providers, sorted."""
    return tuple(sorted(_PROVIDERS))


def resolve_provider(settings: Settings) -> str | None:
    """Name the provider the settings ask for, or ``None`` when no LLM is configured."""
    if settings.llm_base_url:
        return "openai"
    if settings.xai_api_key is not None and settings.xai_api_key.get_secret_value():
        return "xai"
    return None


def llm_from_settings(settings: Settings, *, provider: str | None = None) -> LLM | None:
    """Build the configured LLM, or return ``None`` when none is configured.

    Raises:
        ConfigurationError: ``provider`` names no registered provider, or the provider's
            settings are incomplete (e.g. a base URL without a model).
    """
    name = provider or resolve_provider(settings)
    if name is None:
        return None
    try:
        factory = _PROVIDERS[name]
    except KeyError:
        known = ", ".join(provider_names())
        raise ConfigurationError(f"unknown LLM provider {name!r}; known: {known}") from None
    return factory(settings)


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return get() if callable(get) else None


def _openai(settings: Settings) -> LLM:
    if not settings.llm_base_url:
        raise ConfigurationError("CONFIDE_LLM_BASE_URL is required for the 'openai' provider")
    if not settings.llm_model:
        raise ConfigurationError("CONFIDE_LLM_MODEL is required with CONFIDE_LLM_BASE_URL")
    return OpenAICompatibleLLM(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=_secret(settings.llm_api_key),
    )


def _xai(settings: Settings) -> LLM:
    # A missing key is reported by each call as ProviderError, not here: the caller asked
    # for xAI explicitly and extraction must degrade quietly rather than refuse to start.
    return OpenAICompatibleLLM(
        base_url=XAI_BASE_URL,
        model=settings.xai_grok_model,
        api_key=_secret(settings.xai_api_key),
        require_api_key=True,
    )


register_provider("openai", _openai)
register_provider("xai", _xai)
