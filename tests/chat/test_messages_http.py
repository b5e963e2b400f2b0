"""``/v1/conversations/{id}/messages`` over HTTP, on both backends."""

from __future__ import annotations

import pytest
from tests.chat.conftest import ApiFactory

pytestmark = pytest.mark.asyncio


async def test_post_and_list_messages(chat_api: ApiFactory) -> None:
    async with chat_api() as api:
        for i in range(5):
            saved = await api.say("conv-1", "ann", f"hello {i}", subject_id="granny")
            assert set(saved) == {"id", "index"} and saved["index"] == i
        first = await api.get("/v1/conversations/conv-1/messages", user_id="ann", limit=2)
        assert first.status_code == 200, first.text
        body = first.json()
        assert [m["content"] for m in body["messages"]] == ["hello 0", "hello 1"]
        assert body["messages"][0]["role"] == "user"
        assert body["messages"][0]["subject_id"] == "granny"
        assert body["next_cursor"] == 1
        rest = await api.get(
            "/v1/conversations/conv-1/messages", user_id="ann", cursor=body["next_cursor"]
        )
        assert [m["index"] for m in rest.json()["messages"]] == [2, 3, 4]
        assert rest.json()["next_cursor"] is None


async def test_errors_are_clear_4xx_and_write_nothing(chat_api: ApiFactory) -> None:
    async with chat_api() as api:
        await api.say("conv-1", "ann", "hello")
        path = "/v1/conversations/conv-1/messages"
        for body in (
            {"user_id": "ann", "role": "system", "content": "x"},
            {"user_id": "ann", "role": "user", "content": ""},
            {"user_id": "ann", "role": "user"},
            {"role": "user", "content": "x"},
            {"user_id": "ann", "role": "user", "content": "x", "extra": 1},
        ):
            response = await api.post(path, body)
            assert response.status_code == 400, response.text
            assert "error" in response.json()
        other = await api.post(path, {"user_id": "bob", "role": "user", "content": "hi"})
        assert other.status_code == 404
        assert (await api.get(path, user_id="bob")).status_code == 404
        assert (await api.get(path)).status_code == 400
        assert (await api.get(path, user_id="ann", limit=0)).status_code == 400
        listed = await api.get(path, user_id="ann")
        assert [m["content"] for m in listed.json()["messages"]] == ["hello"]
        unauthenticated = await api.client.post(
            path, json={"user_id": "ann", "role": "user", "content": "x"}
        )
        assert unauthenticated.status_code == 401
