"""The OpenAI-compatible client against the scripted server over real loopback HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from confide.errors import ProviderError
from confide.llm import Message, OpenAICompatibleLLM
from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply

HELLO: list[Message] = [{"role": "user", "content": "hello"}]


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


def _complete(llm: OpenAICompatibleLLM, *, timeout: float = 5.0) -> str:
    return asyncio.run(llm.complete(HELLO, temperature=0.3, timeout=timeout))


def test_returns_content_and_sends_model_temperature_and_key(server: ScriptedLLMServer) -> None:
    server.enqueue("hi there")
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="grok-test", api_key="sk-1")

    assert _complete(llm) == "hi there"

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-1"
    assert request.json["model"] == "grok-test"
    assert request.json["temperature"] == 0.3
    assert request.messages == [{"role": "user", "content": "hello"}]
    assert "max_tokens" not in request.json


def test_max_tokens_is_sent_when_given(server: ScriptedLLMServer) -> None:
    server.enqueue("short")
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m")
    answer = asyncio.run(llm.complete(HELLO, temperature=0.0, timeout=5.0, max_tokens=220))
    assert answer == "short"
    assert server.requests[0].json["max_tokens"] == 220


def test_no_key_sends_no_authorization(server: ScriptedLLMServer) -> None:
    server.enqueue("ok")
    llm = OpenAICompatibleLLM(base_url=server.base_url + "/", model="local")
    assert _complete(llm) == "ok"
    assert "authorization" not in server.requests[0].headers


def test_required_key_missing_raises_provider_error_without_a_request(
    server: ScriptedLLMServer,
) -> None:
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m", require_api_key=True)
    with pytest.raises(ProviderError, match="key is missing"):
        _complete(llm)
    assert server.requests == []


@pytest.mark.parametrize("status", [400, 401, 429, 500, 503])
def test_non_2xx_is_provider_error(server: ScriptedLLMServer, status: int) -> None:
    server.enqueue(ScriptedReply(status=status, body=b'{"error": {"message": "nope"}}'))
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m")
    with pytest.raises(ProviderError, match=f"HTTP {status}"):
        _complete(llm)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>gateway</html>",
        b'{"choices": []}',
        b'{"choices": [{"message": {}}]}',
        b'{"choices": [{"message": {"content": 42}}]}',
        b"[1, 2",
        b'"just a string"',
    ],
)
def test_malformed_bodies_are_provider_errors(server: ScriptedLLMServer, body: bytes) -> None:
    server.enqueue(ScriptedReply(body=body))
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m")
    with pytest.raises(ProviderError):
        _complete(llm)


def test_timeout_is_provider_error(server: ScriptedLLMServer) -> None:
    server.enqueue(ScriptedReply(content="late", delay=30.0))
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m")
    with pytest.raises(ProviderError, match="timed out"):
        _complete(llm, timeout=0.2)


def test_dropped_connection_is_provider_error(server: ScriptedLLMServer) -> None:
    server.enqueue(ScriptedReply(drop=True))
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m")
    with pytest.raises(ProviderError):
        _complete(llm)


def test_unreachable_server_is_provider_error() -> None:
    with ScriptedLLMServer() as srv:
        url = srv.base_url
    llm = OpenAICompatibleLLM(base_url=url, model="m")
    with pytest.raises(ProviderError, match="failed"):
        _complete(llm)


def test_error_messages_never_carry_the_prompt(server: ScriptedLLMServer) -> None:
    server.enqueue(ScriptedReply(status=500, body=b"hello"))
    llm = OpenAICompatibleLLM(base_url=server.base_url, model="m")
    with pytest.raises(ProviderError) as info:
        _complete(llm)
    assert "hello" not in str(info.value)
