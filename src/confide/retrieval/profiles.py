"""Agent profiles: who an agent is and how it works, read from the categories YAML.

A profile holds only static text (identity, personality, knowledge, goals, channel
guidelines, policies, escalation rules, examples) and how the agent takes its memory:
``history`` (chat: a static system prompt, memory as context messages) or ``instructions``
(realtime voice: memories written into the prompt). The YAML's optional ``profiles``
section maps agent names to profiles.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentProfile", "DeliveryMode", "Example"]

_STRICT = ConfigDict(frozen=True, extra="forbid")
Text = Annotated[str, Field(max_length=20_000)]


class DeliveryMode(StrEnum):
    """How an agent's model receives memory."""

    HISTORY = "history"
    """Chat: a static, cacheable system prompt; memory as context messages."""
    INSTRUCTIONS = "instructions"
    """Realtime voice: one prompt with the user's memories written into it."""


class Example(BaseModel):
    """One example exchange."""

    model_config = _STRICT

    user: Text
    assistant: Text


class AgentProfile(BaseModel):
    """An agent's static description; see :mod:`confide.chat.prompt` for the prompt."""

    model_config = _STRICT

    identity: Text
    personality: Text = ""
    knowledge: tuple[Text, ...] = ()
    goals: tuple[Text, ...] = ()
    channel_guidelines: dict[str, Text] = Field(default_factory=dict)
    policies: tuple[Text, ...] = ()
    escalation_rules: tuple[Text, ...] = ()
    examples: tuple[Example, ...] = ()
    delivery: DeliveryMode = DeliveryMode.HISTORY
