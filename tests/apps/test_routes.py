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


async def test_the_admin_routes_are_served_under_v1_too(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        await _filled(api, "notes", 3)
        admin = api.headers(admin=True)
        v1 = await api.client.get("/v1/apps/notes/memories", headers=admin)
        assert v1.status_code == 200
        assert v1.json() == (await api.client.get("/apps/notes/memories", headers=admin)).json()
        first = v1.json()["memories"][0]["id"]
        one = await api.client.delete(f"/v1/apps/notes/memories/{first}", headers=admin)
        assert (one.status_code, one.json()) == (200, {"success": True})
        rest = await api.client.delete("/v1/apps/notes/memories", headers=admin)
        assert (rest.status_code, rest.json()) == (200, {"success": True, "deletedCount": 2})
        for method, path in (
            ("GET", "/v1/apps/notes/memories"),
            ("DELETE", "/v1/apps/notes/memories"),
            ("DELETE", "/v1/apps/notes/memories/x"),
            ("DELETE", "/v1/apps/notes"),
            ("DELETE", "/apps/notes"),
        ):
            refused = await api.client.request(method, path, headers=api.headers())
            assert refused.status_code == 403, (method, path)


async def test_uninstall_route_keeps_the_memories_unless_purge(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        await _filled(api, "notes", 3)
        await _filled(api, "mail", 1)
        admin = api.headers(admin=True)
        kept = await api.client.delete("/v1/apps/notes", headers=admin)
        assert (kept.status_code, kept.json()) == (
            200,
            {"success": True, "appId": "notes", "purged": False, "deletedCount": 0,
             "erasure": None},
        )  # fmt: skip
        assert api.apps.settings_of(ACCOUNT, "notes").uninstalled
        assert len(api.apps.memories(ACCOUNT, "notes")) == 3
        purged = await api.client.delete("/apps/notes", params={"purge": "true"}, headers=admin)
        assert purged.status_code == 200, purged.text
        answer = purged.json()
        assert (answer["purged"], answer["deletedCount"]) == (True, 3)
        assert answer["erasure"]["user_id"] == "app:notes"
        report = await api.client.get(f"/v1/erasures/{answer['erasure']['id']}", headers=admin)
        assert report.status_code == 200, report.text
        assert api.apps.memories(ACCOUNT, "notes") == []
        assert len(api.apps.memories(ACCOUNT, "mail")) == 1
        bad = await api.client.delete("/v1/apps/bad app!", headers=admin)
        assert bad.status_code == 400
        # Configured again, the app is installed again.
        await api.client.put("/v1/apps/notes", json={"name": "Notes"}, headers=admin)
        assert not api.apps.settings_of(ACCOUNT, "notes").uninstalled


async def test_uninstall_is_documented_in_openapi(apps_api: ApiFactory) -> None:
    async with apps_api() as api:
        paths = api.app.openapi()["paths"]
        for path in ("/v1/apps/{app_id}", "/apps/{app_id}"):
            operation = paths[path]["delete"]
            assert "Uninstall the app" in operation["description"]
            [purge] = [p for p in operation["parameters"] if p["name"] == "purge"]
            assert purge["in"] == "query" and "crypto-shred" in purge["description"]
            schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
            assert schema["$ref"].endswith("/UninstalledOut")
        assert {"get", "delete"} <= set(paths["/v1/apps/{app_id}/memories"])


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
