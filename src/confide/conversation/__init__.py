"""The conversation layer: session buffer, memory tools, extraction, Realtime adapter, prompts."""

from confide.conversation.buffer import Session, SessionBuffer, Turn
from confide.conversation.extraction import (
    DEFAULT_SENSITIVE_KEYS,
    ExtractionPipeline,
    ExtractionReport,
    Extractor,
    LLMExtractor,
    MemorySink,
    ProposalSink,
    ProposedChange,
)
from confide.conversation.prompts import build_system_prompt, format_memories
from confide.conversation.realtime import Dispatcher, MemoryLoader, RealtimeAdapter
from confide.conversation.tools import chat_tools, parse_arguments, realtime_tools, tools_json

__all__ = [
    "DEFAULT_SENSITIVE_KEYS",
    "Dispatcher",
    "ExtractionPipeline",
    "ExtractionReport",
    "Extractor",
    "LLMExtractor",
    "MemoryLoader",
    "MemorySink",
    "ProposalSink",
    "ProposedChange",
    "RealtimeAdapter",
    "Session",
    "SessionBuffer",
    "Turn",
    "build_system_prompt",
    "chat_tools",
    "format_memories",
    "parse_arguments",
    "realtime_tools",
    "tools_json",
]
