"""The static system prompt of an agent profile, and the two ways memory reaches a model.

The static prompt is built from the profile alone (no memory, message or fact can reach
it), in a fixed order with fixed headings, so it is byte-identical across turns and a
provider can cache it. :meth:`PromptDelivery.deliver` picks the agent's mode:

- ``history`` (chat): the static prompt, the conversation's history as messages and
  memory as context messages (:meth:`ChatMemory.retrieve`);
- ``instructions`` (realtime voice): one prompt as the voice seed needs it, the static
  prompt with the user's memories and the subject's facts written in
  (:func:`confide.conversation.prompts.build_system_prompt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from confide.chat.types import ContextMessage
from confide.retrieval.profiles import AgentProfile, DeliveryMode

__all__ = ["Delivery", "build_static_prompt"]


def _bullets(heading: str, items: Sequence[str]) -> str | None:
    lines = [" ".join(i.split()) for i in items if i.strip()]
    if not lines:
        return None
    return "\n".join([f"## {heading}", *(f"- {line}" for line in lines)])


def build_static_prompt(profile: AgentProfile, *, channel: str | None = None) -> str:
    """The agent's system prompt: profile text only, the same bytes on every turn.

    ``channel`` picks that channel's guidelines; ``None`` lists every channel's (sorted).
    """
    parts: list[str | None] = [f"# Identity\n{profile.identity.strip()}"]
    if profile.personality.strip():
        parts.append(f"## Personality\n{profile.personality.strip()}")
    parts.append(_bullets("Knowledge", profile.knowledge))
    parts.append(_bullets("Goals", profile.goals))
    guidelines = profile.channel_guidelines
    if channel is not None:
        chosen = [guidelines[channel]] if channel in guidelines else []
    else:
        chosen = [f"{name}: {guidelines[name]}" for name in sorted(guidelines)]
    parts.append(_bullets("Channel guidelines", chosen))
    parts.append(_bullets("Policies", profile.policies))
    parts.append(_bullets("Escalation rules", profile.escalation_rules))
    if profile.examples:
        examples = [
            f"User: {' '.join(e.user.split())}\nAssistant: {' '.join(e.assistant.split())}"
            for e in profile.examples
        ]
        parts.append("## Examples\n" + "\n\n".join(examples))
    return "\n\n".join(p for p in parts if p)


@dataclass(frozen=True)
class Delivery:
    """What to send a model for one turn.

    ``history``: ``system_prompt`` (static), then ``context_messages``, then ``messages``.
    ``instructions``: ``system_prompt`` with memory written in; no context messages.
    """

    mode: DeliveryMode
    system_prompt: str
    context_messages: list[ContextMessage] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
