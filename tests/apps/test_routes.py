"""The app routes on both backends: ending a conversation, the context, the admin API
with its exact bodies, key scopes and 404s, and usage."""

from __future__ import annotations

import pytest
from tests.apps.conftest import ACCOUNT, ApiFactory, AppsApi, transcript

from confide.testing.scripted_llm import ScriptedLLMServer, ScriptedReply

pytestmark = pytest.mark.asyncio

PARAGRAPH = "The user prefers option 1 for the report. The deadline moved to Friday."


async def test_end_route_answers_at_once_and_writes_in_background(
    apps_api: ApiFactory, llm_server: ScriptedLLMServer
) -> None:
    llm_server.enqueue(ScriptedReply(content=PARAGRAPH, delay=0.5))
    async with apps_api(llm_base_url=llm_server.base_url, llm_model="scripted") as api:
        response = await api.end("notes", "c1", {"messages": transcript(1), "reason": "done"})
        assert response.status_code == 202, response.text
        assert response.json() == {"status": "accepted", "appId": "notes", "conversationId": "c1"}
        assert api.apps.memories(ACCOUNT, "notes") == []  # the LLM is still answering
        await api.join()
        assert [m.value for m in api.apps.memories(ACCOUNT, "notes")] == [PARAGRAPH]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": []},
        {"messages": [{"role": "user"}]},
        {"messages": [{"role": "user", "content": "x"}], "extra": 1},
        {"messages": "hello"},
    ],
)
async def test_end_route_refuses_bad_bodies(apps_api: ApiFactory, body: object) -> None:
    async with apps_api() as api:
        response = await api.end("notes", "c1", body)
        assert response.status_code == 400, response.text
        bad_app = await api.end("bad app!", "c1", {"messages": transcript(1)})
        assert bad_app.status_code == 400, bad_app.text
        await api.join()
        assert api.apps.memories(ACCOUNT, "notes") == []


async def _filled(api: AppsApi, app_id: str, count: int) -> None:
    for n in range(count):
        response = await api.end(app_id, f"c{n}", {"messages": transcript(n)})
        assert response.status_code == 202
    await api.join()


async def test_context_route_returns_the_system_message(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        empty = await api.client.get("/v1/apps/notes/context", headers=api.headers())
        assert empty.status_code == 200
        assert empty.json() == {"role": "system", "content": ""}
        await _filled(api, "notes", 2)
        response = await api.client.get("/v1/apps/notes/context", headers=api.headers())
        assert response.json() == {
            "role": "system",
            "content": api.apps.context(ACCOUNT, "notes"),
        }
        assert response.json()["content"].startswith("(memories for app: notes)\n")


async def test_admin_routes_exact_bodies(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        await _filled(api, "notes", 3)
        await _filled(api, "mail", 1)
        admin = api.headers(admin=True)
        listed = await api.client.get("/apps/notes/memories", headers=admin)
        assert listed.status_code == 200
        memories = listed.json()["memories"]
        assert list(listed.json()) == ["memories"]
        assert [set(m) for m in memories] == [{"id", "content", "createdAt", "updatedAt"}] * 3
        assert [m["content"] for m in memories] == [
            f"The user prefers option {n} for the report." for n in (2, 1, 0)
        ]
        one = await api.client.delete(f"/apps/notes/memories/{memories[0]['id']}", headers=admin)
        assert (one.status_code, one.json()) == (200, {"success": True})
        again = await api.client.delete(f"/apps/notes/memories/{memories[0]['id']}", headers=admin)
        assert again.status_code == 404
        assert again.json()["success"] is False
        [mail] = api.apps.memories(ACCOUNT, "mail")
        cross = await api.client.delete(f"/apps/notes/memories/{mail.id}", headers=admin)
        assert cross.status_code == 404  # another app's memory
        unknown = await api.client.delete("/apps/notes/memories/nope", headers=admin)
        assert unknown.status_code == 404
        everything = await api.client.delete("/apps/notes/memories", headers=admin)
        assert (everything.status_code, everything.json()) == (
            200,
            {"success": True, "deletedCount": 2},
        )
        assert (await api.client.get("/apps/notes/memories", headers=admin)).json() == {
            "memories": []
        }
        assert len(api.apps.memories(ACCOUNT, "mail")) == 1


async def test_admin_routes_need_the_admin_scope(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        keys = api.app.state.services.keys
        read = {"Authorization": f"Bearer {keys.create(ACCOUNT, scope='read')}"}
        for headers in (api.headers(), read, {}):
            for method, path in (
                ("GET", "/apps/notes/memories"),
                ("DELETE", "/apps/notes/memories"),
                ("DELETE", "/apps/notes/memories/x"),
            ):
                response = await api.client.request(method, path, headers=headers)
                assert response.status_code == (401 if not headers else 403), (method, path)


async def test_read_scope_reads_but_never_writes(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        keys = api.app.state.services.keys
        read = {"Authorization": f"Bearer {keys.create(ACCOUNT, scope='read')}"}
        ended = await api.client.post(
            "/v1/apps/notes/conversations/c1/end", json={"messages": transcript(1)}, headers=read
        )
        assert ended.status_code == 403
        context = await api.client.get("/v1/apps/notes/context", headers=read)
        assert context.status_code == 200
        await api.join()
        assert api.apps.memories(ACCOUNT, "notes") == []


async def test_configure_sets_name_and_cap(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        admin = api.headers(admin=True)
        body = {"name": "Team Notes", "memoryCap": 2}
        response = await api.client.put("/v1/apps/notes", json=body, headers=admin)
        assert response.json() == {
            "appId": "notes",
            "name": "Team Notes",
            "memoryCap": 2,
            "uninstalled": False,
        }
        await _filled(api, "notes", 4)
        assert len(api.apps.memories(ACCOUNT, "notes")) == 2
        bad = await api.client.put("/v1/apps/notes", json={"memoryCap": 0}, headers=admin)
        assert bad.status_code == 400
        refused = await api.client.put("/v1/apps/notes", json=body, headers=api.headers())
        assert refused.status_code == 403
