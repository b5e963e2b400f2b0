"""LLM providers: the ``LLM`` protocol, an OpenAI-compatible client, a provider registry
and the offline (model-free) memory extractor."""

from engram.llm.base import LLM, Message, Role
from engram.llm.candidates import Candidate
from engram.llm.offline import OfflineExtractor
from engram.llm.openai_compat import OpenAICompatibleLLM
from engram.llm.registry import (
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
