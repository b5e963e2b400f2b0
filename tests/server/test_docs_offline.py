"""``/docs`` and ``/redoc`` load every asset from the app itself: nothing from a CDN."""

from __future__ import annotations

import re

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.asyncio

_ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_use_only_same_origin_assets_that_the_app_serves(
    api: Api, page: str
) -> None:
    response = await api.client.get(page)
    assert response.status_code == 200
    html = response.text
    assets = _ASSET.findall(html)
    assert len(assets) >= 2, html  # a script and the icon at least
    assert "://" not in html and "//cdn" not in html
    for url in assets:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = await api.client.get(url)
        assert asset.status_code == 200, url
        assert asset.content, url
    scripts = [u for u in assets if u.endswith(".js")]
    assert scripts, html
    spec_url = re.search(r"""(?:url:\s*|spec-url=)["']([^"']+)["']""", html)
    assert spec_url is not None and spec_url.group(1) == "/openapi.json"


async def test_swagger_ui_does_not_call_the_online_validator(api: Api) -> None:
    html = (await api.client.get("/docs")).text
    assert '"validatorUrl": null' in html
