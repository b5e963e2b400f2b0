"""Chat memory: a conversation's messages, its history with memory as context, rolling
summaries and per-subject facts.

Built on the engine's public operations (memories, ``seal_value``/``open_value``, one
transaction for a summary and what it covers) and retrieval's :class:`MemoryReader`
reads; the SDK and the service reach it through :class:`ChatMemory`.
"""

from confide.chat.service import ChatMemory
from confide.chat.types import (
    ChatMessage,
    ContextItem,
    ContextMessage,
    ConversationHistory,
    FactCategory,
    HistoryMetadata,
    MemoryContext,
    MessagePage,
    NewMessage,
    SavedMessage,
    SubjectFact,
)

__all__ = [
    "ChatMemory",
    "ChatMessage",
    "ContextItem",
    "ContextMessage",
    "ConversationHistory",
    "FactCategory",
    "HistoryMetadata",
    "MemoryContext",
    "MessagePage",
    "NewMessage",
    "SavedMessage",
    "SubjectFact",
]
