"""LLM providers: the ``LLM`` protocol, an OpenAI-compatible client, a provider registry
and the offline (model-free) memory extractor."""

from confide.llm.base import LLM, Message, Role
from confide.llm.candidates import Candidate
from confide.llm.offline import OfflineExtractor
from confide.llm.openai_compat import OpenAICompatibleLLM
from confide.llm.registry import (
    llm_from_settings,
    provider_names,
    register_provider,
    resolve_provider,
)

__all__ = [
    "LLM",
    "Candidate",
    "Message",
    "OfflineExtractor",
    "OpenAICompatibleLLM",
    "Role",
    "llm_from_settings",
    "provider_names",
    "register_provider",
    "resolve_provider",
]
