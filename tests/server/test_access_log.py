"""``confide serve``'s access log names route templates, never the ids in a request's path or
query: a user id, a conversation id or a memory id in a URL stays out of the log."""

from __future__ import annotations

from pathlib import Path

import httpx

from confide.testing.processes import confide_env, serve

USER = "user-zebra-417"
CONVERSATION = "conv-zebra-529"
MEMORY = "memory-zebra-631"


def test_access_lines_name_the_route_template_not_the_ids(tmp_path: Path) -> None:
    env = confide_env(
        {
            "CONFIDE_HOME": str(tmp_path / "home"),
            "MEMORY_ENCRYPTION_KEY": "77" * 32,
            "CONFIDE_EMBEDDER": "none",
        }
    )
    with serve(env, with_stdout=True) as server, httpx.Client(base_url=server.wait_ready()) as http:
        # No key: each answer is a refusal, and each is logged like any other request.
        statuses = [
            http.delete(f"/v1/users/{USER}").status_code,
            http.get(f"/v1/conversations/{CONVERSATION}/messages").status_code,
            http.get(f"/v1/memories/{MEMORY}").status_code,
            http.get("/v1/memories", params={"user_id": USER}).status_code,
        ]
    assert all(400 <= s < 500 for s in statuses), statuses
    log = "\n".join(server.lines)
    for secret in (USER, CONVERSATION, MEMORY):
        assert secret not in log
    for line in (
        "DELETE /v1/users/{user_id} 401",
        "GET /v1/conversations/{conversation_id}/messages 401",
        "GET /v1/memories/{memory_id} 401",
        "GET /v1/memories 401",
    ):
        assert line in log, log
