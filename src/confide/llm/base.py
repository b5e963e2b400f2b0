"""The LLM protocol: one chat-completion call that returns the assistant's text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypedDict, runtime_checkable

__all__ = ["LLM", "Message", "Role"]

Role = Literal["system", "user", "assistant"]


class Message(TypedDict):
    """One chat message, in the OpenAI chat-completions shape."""

    role: Role
    content: str


@runtime_checkable
class LLM(Protocol):
    """A chat model.

    Implementations translate every transport or vendor failure (timeout, non-2xx answer,
    malformed body, missing credentials) into :class:`confide.errors.ProviderError`.
    """

    @property
    def model_id(self) -> str:
        """The model's name, as sent to the provider."""
        ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float,
        timeout: float,
        max_tokens: int | None = None,
    ) -> str:
        """Return the assistant's reply to ``messages``, at most ``max_tokens`` long when set.

        Raises:
            ProviderError: the provider could not be reached or answered badly.
        """
        ...
