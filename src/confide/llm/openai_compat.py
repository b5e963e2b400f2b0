"""An OpenAI-compatible chat-completions client over HTTP (xAI, OpenAI, vLLM, Ollama, ...)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from confide.errors import ProviderError
from confide.llm.base import Message

__all__ = ["OpenAICompatibleLLM"]


class OpenAICompatibleLLM:
    """Calls ``POST {base_url}/chat/completions`` and returns the first choice's text.

    The API key is sent as a bearer token; servers that need none (a local llama.cpp or
    Ollama) accept an empty one; with ``require_api_key`` a missing key fails each call
    (not construction), so a conversation keeps going without extraction. Every failure
    is raised as :class:`ProviderError` whose message names the cause but never the
    prompt or the answer.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        require_api_key: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise ProviderError("LLM base URL is empty")
        if not model:
            raise ProviderError("LLM model name is empty")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key = api_key
        self._require_api_key = require_api_key
        self._transport = transport

    @property
    def model_id(self) -> str:
        """The model's name, as sent to the provider."""
        return self._model

    @property
    def base_url(self) -> str:
        """The chat-completions endpoint this client posts to."""
        return self._url

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float,
        timeout: float,
        max_tokens: int | None = None,
    ) -> str:
        """Send ``messages`` and return the reply text (``max_tokens`` caps the completion).

        Raises:
            ProviderError: a required API key is missing; a timeout, a connection error,
                a non-2xx status, or a body that is not JSON or lacks
                ``choices[0].message.content``.
        """
        if self._require_api_key and not self._api_key:
            raise ProviderError("LLM API key is missing")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        try:
            async with httpx.AsyncClient(timeout=timeout, transport=self._transport) as client:
                response = await client.post(self._url, json=payload, headers=headers)
        except httpx.TimeoutException:
            raise ProviderError(f"LLM request timed out after {timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise ProviderError(f"LLM request failed: {type(exc).__name__}") from None
        if not response.is_success:
            raise ProviderError(f"LLM answered HTTP {response.status_code}")
        return _content_of(response.content)


def _content_of(body: bytes) -> str:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProviderError("LLM answered with a body that is not JSON") from None
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError("LLM answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise ProviderError("LLM answer content is not text")
    return content
