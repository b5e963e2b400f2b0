"""The review page ``/ui`` in a real headless browser (Debian's chromium via chromedriver and
Selenium) against the service on a loopback socket: every action, with screenshots saved in
the test's output folder.

Every request the browser makes is recorded on the server side, so the test can check that
no memory value ever appears in a URL, and the log records that none appears in a log line.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from confide.config import Settings
from confide.conversation.extraction import ProposedChange
from confide.server import create_app
from confide.server.services import Services
from confide.testing.loopback import serve_on_loopback
from confide.types import MemoryType, NewMemory, Visibility

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
VALUES = {
    "dog_name": "Her dog is called Biscuit",
    "city": "Lives in Porto",
    "drink": "Takes her tea with lemon",
    "doctor": "Dr Alvarez on Tuesdays",
}
NEW_VALUE = "Her dog Biscuit turned twelve"
PROPOSED = {"city": "Moved to Braga", "doctor": "Dr Okafor on Fridays"}
_SERVER_LOGGERS = {"confide", "uvicorn", "fastapi"}
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium "
    "chromium-driver; .ci/run installs them)",
)


@dataclass
class Served:
    url: str
    token: str
    services: Services
    paths: list[str]


class _RecordPaths:
    """ASGI wrapper that records each request's path and query string."""

    def __init__(self, app: Any, paths: list[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            query = scope.get("query_string", b"").decode()
            self.paths.append(scope["path"] + ("?" + query if query else ""))
        await self.app(scope, receive, send)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    settings = Settings(
        home=tmp_path / "home", encryption_key=bytes(range(32)).hex(), embedder="none"
    )
    app = create_app(settings, warm_up=False)
    services: Services = app.state.services
    token = services.keys.create("acme")
    engine = services.engine
    for key, value in VALUES.items():
        engine.store(NewMemory(account_id="acme", user_id="ann", key=key, value=value))
    engine.store(NewMemory(account_id="acme", user_id="bob", key="city", value="Oslo"))
    for key, proposed in PROPOSED.items():
        services.proposals.file(
            ProposedChange(
                account_id="acme",
                user_id="ann",
                key=key,
                current_value=VALUES[key],
                proposed_value=proposed,
                type=MemoryType.FACT,
                confidence=0.9,
                session_id="s-1",
            )
        )
    paths: list[str] = []
    with serve_on_loopback(_RecordPaths(app, paths)) as url:
        yield Served(url, token, services, paths)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1200,1400")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: webdriver.Chrome) -> WebDriverWait[webdriver.Chrome]:
    return WebDriverWait(driver, 15)


def _status(driver: webdriver.Chrome, text: str) -> None:
    _wait(driver).until(ec.text_to_be_present_in_element((By.ID, "status"), text))


def _card(driver: webdriver.Chrome, key: str) -> WebElement:
    return _wait(driver).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f'li.memory[data-key="{key}"]'))
    )


def _click(driver: webdriver.Chrome, key: str, action: str) -> None:
    _card(driver, key).find_element(By.CSS_SELECTOR, f"button.{action}").click()


def test_every_review_action_in_a_real_browser(
    served: Served,
    browser: webdriver.Chrome,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for server_side in ("confide", "uvicorn", "fastapi"):
        caplog.set_level(logging.DEBUG, logger=server_side)
    shots = tmp_path / "screenshots"
    shots.mkdir()

    def shot(name: str) -> None:
        assert browser.save_screenshot(str(shots / name))

    engine = served.services.engine
    browser.get(f"{served.url}/ui")
    shot("01-sign-in.png")

    # A wrong key is refused; the right one signs in.
    browser.find_element(By.ID, "api-key").send_keys("cfk_wrong_key")
    browser.find_element(By.ID, "sign-in-button").click()
    _status(browser, "Sign-in failed: Invalid API key")
    browser.find_element(By.ID, "api-key").clear()
    browser.find_element(By.ID, "api-key").send_keys(served.token)
    browser.find_element(By.ID, "sign-in-button").click()
    _status(browser, "Signed in.")
    assert browser.find_element(By.ID, "who").text == "account acme"

    # Pick a user from the account's users.
    users = Select(browser.find_element(By.ID, "user-select"))
    assert [o.text for o in users.options] == ["ann", "bob"]
    users.select_by_visible_text("ann")
    browser.find_element(By.ID, "pick-user").click()
    _status(browser, "4 memories.")
    values = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.memory .value")}
    assert values == set(VALUES.values())  # decrypted for display
    shot("02-memories.png")

    # Search.
    browser.find_element(By.ID, "query").send_keys("Biscuit")
    browser.find_element(By.ID, "search").click()
    _status(browser, "1 results.")
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.memory .key")] == [
        "dog_name"
    ]
    shot("03-search.png")

    # Edit: a new version with the new value.
    _click(browser, "dog_name", "edit")
    editor = _card(browser, "dog_name").find_element(By.CSS_SELECTOR, "textarea.edit-value")
    editor.clear()
    editor.send_keys(NEW_VALUE)
    _card(browser, "dog_name").find_element(By.CSS_SELECTOR, "button.save").click()
    _status(browser, "Saved as a new version.")
    current = engine.get_by_key(account_id="acme", user_id="ann", key="dog_name")
    assert current is not None and (current.value, current.version) == (NEW_VALUE, 2)

    # History timeline of the edited memory.
    _click(browser, "dog_name", "history")
    _status(browser, "2 events.")
    events = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#history li")]
    assert "UPDATE" in events[0] and "ADD" in events[1]
    shot("04-history.png")

    # Toggle private → shared → private.
    _click(browser, "drink", "visibility")
    _status(browser, "Now shared.")
    drink = engine.get_by_key(account_id="acme", user_id="ann", key="drink")
    assert drink is not None and drink.visibility is Visibility.SHARED
    _click(browser, "drink", "visibility")
    _status(browser, "Now private.")

    # Forget, then restore.
    _click(browser, "drink", "forget")
    _status(browser, "Forgotten (it can be restored).")
    assert engine.get_by_key(account_id="acme", user_id="ann", key="drink") is None
    assert "soft_deleted" in (_card(browser, "drink").get_attribute("class") or "")
    shot("05-forgotten.png")
    _click(browser, "drink", "restore")
    _status(browser, "Restored.")
    assert engine.get_by_key(account_id="acme", user_id="ann", key="drink") is not None

    # Pending proposals: confirm one, reject the other.
    proposals = browser.find_elements(By.CSS_SELECTOR, "#proposals li.proposal")
    assert sorted(p.find_element(By.CSS_SELECTOR, ".proposed").text for p in proposals) == sorted(
        PROPOSED.values()
    )
    shot("06-proposals.png")
    city = next(p for p in proposals if p.find_element(By.CSS_SELECTOR, ".key").text == "city")
    city.find_element(By.CSS_SELECTOR, "button.confirm").click()
    _status(browser, "Confirmed.")
    moved = engine.get_by_key(account_id="acme", user_id="ann", key="city")
    assert moved is not None and moved.value == PROPOSED["city"]
    doctor = _wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#proposals li.proposal .reject"))
    )
    doctor.click()
    _status(browser, "Rejected.")
    assert served.services.proposals.pending(account_id="acme", user_id="ann") == []
    kept = engine.get_by_key(account_id="acme", user_id="ann", key="doctor")
    assert kept is not None and kept.value == VALUES["doctor"]

    # Export: the decrypted document, downloaded by the browser.
    browser.find_element(By.ID, "export").click()
    _status(browser, "Exported")
    download = tmp_path / "downloads" / "confide-export-ann.json"
    _wait(browser).until(lambda _: download.exists() and download.stat().st_size > 0)
    exported = json.loads(download.read_text())
    assert exported["user_id"] == "ann"
    assert NEW_VALUE in {m["value"] for m in exported["memories"]}
    shot("07-export.png")

    # No value, old or new, ever went into a URL or a log line.
    secrets = [*VALUES.values(), NEW_VALUE, *PROPOSED.values(), "Biscuit"]
    assert any(p.startswith("/v1/memories?user_id=ann") for p in served.paths)
    for path in served.paths:
        assert not any(s in path or s.replace(" ", "%20") in path for s in secrets), path
    server_records = [r for r in caplog.records if r.name.split(".")[0] in _SERVER_LOGGERS]
    for record in server_records:
        assert not any(s in record.getMessage() for s in secrets), record.name
    saved = sorted(p.name for p in shots.iterdir())
    assert saved == [
        "01-sign-in.png",
        "02-memories.png",
        "03-search.png",
        "04-history.png",
        "05-forgotten.png",
        "06-proposals.png",
        "07-export.png",
    ]
    print(f"screenshots in {shots}: {', '.join(saved)}")
