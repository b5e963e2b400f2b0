"""The conversation layer: session buffer, memory tools, extraction, Realtime adapter, prompts."""

from engram.conversation.buffer import Session, SessionBuffer, Turn
from engram.conversation.extraction import (
    DEFAULT_SENSITIVE_KEYS,
    ExtractionPipeline,
    ExtractionReport,
    Extractor,
    LLMExtractor,
    MemorySink,
    ProposalSink,
    ProposedChange,
)
from engram.conversation.prompts import build_system_prompt, format_memories
from engram.conversation.realtime import Dispatcher, MemoryLoader, RealtimeAdapter
from engram.conversation.tools import chat_tools, parse_arguments, realtime_tools, tools_json

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
