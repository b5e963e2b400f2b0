"""Build an embedder from a config string such as ``local:all-MiniLM-L6-v2``.

Spec strings: ``none`` (no embedder), ``local:all-MiniLM-L6-v2`` and
``openai:<model>@<base_url>`` (any OpenAI-compatible endpoint). A new provider is one more
entry in :data:`PROVIDERS`.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confide.config import EmbedderPrecision, Settings
from confide.embedders.base import Embedder
from confide.embedders.cache import CachedEmbedder
from confide.errors import ConfigurationError

__all__ = ["PROVIDERS", "EmbedderOptions", "build_embedder", "configured_embedder"]

_log = logging.getLogger(__name__)
_LOCAL_RUNTIME = ("onnxruntime", "tokenizers")
_fallback_warned = threading.Event()  # the fallback warning is printed once per process


@dataclass(frozen=True, kw_only=True)
class EmbedderOptions:
    """What a provider factory may need besides the model name."""

    home: Path | None = None
    api_key: str | None = None
    precision: EmbedderPrecision = "int8"
    """The local model's graph (``CONFIDE_EMBEDDER_PRECISION``); other providers ignore it."""


def _local(model: str, options: EmbedderOptions) -> Embedder:
    from confide.embedders.local import MINILM_ID, LocalMiniLMEmbedder

    if model != MINILM_ID:
        raise ConfigurationError(f"local embedder supports only {MINILM_ID!r}, not {model!r}")
    return LocalMiniLMEmbedder(precision=options.precision)


def _openai(model: str, options: EmbedderOptions) -> Embedder:
    from confide.embedders.openai import OpenAICompatibleEmbedder

    name, sep, base_url = model.partition("@")
    if not sep or not name or not base_url.startswith(("http://", "https://")):
        raise ConfigurationError("openai embedder spec must be 'openai:<model>@<http(s) base url>'")
    return OpenAICompatibleEmbedder(model=name, base_url=base_url, api_key=options.api_key)


PROVIDERS: dict[str, Callable[[str, EmbedderOptions], Embedder]] = {
    "local": _local,
    "openai": _openai,
}
"""Provider prefix → factory taking the rest of the spec string."""


def build_embedder(
    spec: str,
    *,
    home: Path | None = None,
    api_key: str | None = None,
    precision: EmbedderPrecision = "int8",
    cache_size: int = 1024,
) -> Embedder | None:
    """Build the embedder a spec string names, wrapped in an LRU query cache.

    Returns ``None`` for ``"none"``. Raises :class:`ConfigurationError` for an unknown
    provider or a malformed spec, :class:`MissingDependencyError` (on first use for local
    models) when the provider's extra is missing.
    """
    cleaned = spec.strip()
    if cleaned.lower() in ("", "none"):
        return None
    prefix, sep, model = cleaned.partition(":")
    factory = PROVIDERS.get(prefix.lower())
    if factory is None or not sep or not model:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigurationError(
            f"embedder spec {spec!r} must be 'none' or '<provider>:<model>' ({known})"
        )
    inner = factory(model, EmbedderOptions(home=home, api_key=api_key, precision=precision))
    return CachedEmbedder(inner, max_entries=cache_size) if cache_size > 0 else inner


def missing_local_runtime() -> str | None:
    """The first package of the ``local`` extra that cannot be found, or ``None``.

    Looks the packages up without importing them (importing ONNX Runtime takes a while).
    """
    for name in _LOCAL_RUNTIME:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return name
    return None


def configured_embedder(settings: Settings, *, cache_size: int = 1024) -> Embedder | None:
    """The embedder an entry point runs with: :func:`embedder_from_settings`, or none.

    When the embedder was not configured (the default, ``local:all-MiniLM-L6-v2``) and the
    ``local`` extra is not installed, Confide runs as with ``CONFIDE_EMBEDDER=none`` (lexical
    search only) and warns once per process, on stderr through the ``logging`` module. An
    explicitly configured local embedder (``CONFIDE_EMBEDDER`` or ``Settings(embedder=...)``)
    keeps raising :class:`MissingDependencyError`, which names the extra, on first use.
    """
    if "embedder" not in settings.model_fields_set:
        missing = missing_local_runtime()
        if missing is not None:
            if not _fallback_warned.is_set():
                _fallback_warned.set()
                _log.warning(
                    "%s is not installed, so Confide runs without an embedder (lexical search "
                    "only); pip install 'confide[local]' for similarity search, or set "
                    "CONFIDE_EMBEDDER=none to silence this",
                    missing,
                )
            return None
    return embedder_from_settings(settings, cache_size=cache_size)


def embedder_from_settings(settings: Settings, *, cache_size: int = 1024) -> Embedder | None:
    """The embedder ``settings.embedder`` names (``None`` for ``none``), never a fallback;
    see :func:`build_embedder`."""
    api_key = settings.embedder_api_key
    return build_embedder(
        settings.embedder,
        home=settings.home,
        api_key=None if api_key is None else api_key.get_secret_value(),
        precision=settings.embedder_precision,
        cache_size=cache_size,
    )
