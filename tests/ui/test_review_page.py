"""The review page ``/ui`` in a real headless browser (Debian's chromium via chromedriver and
Selenium) against the service on a loopback socket: every action, with screenshots saved in
the test's output folder. The service embeds with the real local model, so search scores
are those a person would see, low ones included.

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
from urllib.parse import quote

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
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
BROTHER_KEY = "subject_fact.other.d57bb208beaf"  # a key Confide makes up for a subject fact
PREFERENCES = {  # cy's: more than a page, and a search that matches few of them well
    "dog_breed": "Loves border collies above all other dogs",
    "dog_walks": "Walks the dog along the river every morning",
    "dog_food": "Buys grain-free food for the dog",
    "coffee": "Drinks her coffee black",
    "tea": "Prefers green tea in the afternoon",
    "music": "Listens to Fado when she cooks",
    "films": "Enjoys old black-and-white films",
    "books": "Reads crime novels on the train",
    "sport": "Swims twice a week",
    "holiday": "Spends summer holidays in the Azores",
    "seat": "Asks for a window seat on flights",
    "colour": "Her favourite colour is teal",
    "food": "Does not eat mushrooms",
    "breakfast": "Has porridge for breakfast",
    "cuisine": "Likes Japanese food best",
    "wine": "Prefers white wine to red",
    "morning_call": "Wants calls after ten in the morning",
    "language": "Would rather speak Portuguese",
    "news": "Reads the paper on Sundays",
    "garden": "Grows tomatoes on the balcony",
    "flowers": "Likes sunflowers",
    "theatre": "Goes to the theatre once a month",
    "podcast": "Listens to history podcasts",
    "games": "Plays chess online",
    "car": "Would rather take the train than drive",
}
PAGE_SIZE = 20  # app.js's
HOSTILE = '<img src=x onerror="window.pwned = 1"><b>bold</b>'
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
        home=tmp_path / "home",
        encryption_key=bytes(range(32)).hex(),
        embedder="local:all-MiniLM-L6-v2",
    )
    app = create_app(settings, warm_up=False)
    services: Services = app.state.services
    token = services.keys.create("acme")
    engine = services.engine
    for key, value in VALUES.items():
        ann = NewMemory(account_id="acme", user_id="ann", key=key, value=value)
        engine.store(ann, actor="seed")
    engine.store(
        NewMemory(
            account_id="acme",
            user_id="ann",
            key=BROTHER_KEY,
            value="Her brother Luis lives in Lyon",
            category="subject_fact",
            subject_id="luis",
        ),
        actor="seed",
    )
    engine.store(NewMemory(account_id="acme", user_id="bob", key="city", value="Oslo"))
    engine.store(NewMemory(account_id="acme", user_id="bob", key="note", value=HOSTILE))
    for key, value in PREFERENCES.items():
        # No actor: the history shows that none was recorded.
        engine.store(
            NewMemory(
                account_id="acme", user_id="cy", key=key, value=value, type=MemoryType.PREFERENCE
            )
        )
    # An app's memory: its owner app:notes is internal, never a user to pick.
    engine.store(
        NewMemory(
            account_id="acme",
            user_id="app:notes",
            app_id="notes",
            key="app_memory",
            value="Metric units, please",
        ),
        actor="seed",
    )
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
    options.add_argument("--window-size=1280,900")
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
    try:
        _wait(driver).until(ec.text_to_be_present_in_element((By.ID, "status"), text))
    except TimeoutException:
        shown = driver.find_element(By.ID, "status").text
        raise AssertionError(f"status {shown!r}, waited for {text!r}") from None


def _card(driver: webdriver.Chrome, key: str) -> WebElement:
    return _wait(driver).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f'li.memory[data-key="{key}"]'))
    )


def _click(driver: webdriver.Chrome, key: str, action: str) -> None:
    target = _card(driver, key).find_element(By.CSS_SELECTOR, f"button.{action}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", target)
    target.click()


def _texts(driver: webdriver.Chrome, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def _in_view(driver: webdriver.Chrome, element_id: str) -> bool:
    """Whether the element's box lies within the window (a click that opens it is seen), to
    the pixel (layout rounds to fractions of one)."""
    inside: bool = driver.execute_script(
        "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
        "return r.height > 0 && r.top > -1 && r.bottom < window.innerHeight + 1"
        " && r.left > -1 && r.right < window.innerWidth + 1;",
        element_id,
    )
    return inside


def _sign_in(driver: webdriver.Chrome, served: Served) -> None:
    driver.get(f"{served.url}/ui")
    driver.find_element(By.ID, "api-key").send_keys(served.token)
    driver.find_element(By.ID, "sign-in-button").click()
    _status(driver, "Signed in.")


def _open_user(driver: webdriver.Chrome, user: str) -> None:
    Select(driver.find_element(By.ID, "user-select")).select_by_visible_text(user)
    driver.find_element(By.ID, "pick-user").click()
    _wait(driver).until(
        lambda d: (
            d.find_element(By.ID, "current-user").text == user
            and d.find_elements(By.CSS_SELECTOR, "li.memory")
        )
    )


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

    # Pick a user from the account's users; an app's internal owner is not one of them.
    users = Select(browser.find_element(By.ID, "user-select"))
    assert [o.text for o in users.options] == ["ann", "bob", "cy"]
    assert not any((o.get_attribute("value") or "").startswith("app:") for o in users.options)
    users.select_by_visible_text("ann")
    browser.find_element(By.ID, "pick-user").click()
    _status(browser, "Memories 1–5.")
    values = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.memory .value")}
    assert values == {*VALUES.values(), "Her brother Luis lives in Lyon"}  # decrypted
    assert browser.find_element(By.ID, "pager").is_displayed() is False  # one page
    # Keys read as words; a generated key says what it is, and the key itself stays shown.
    assert _card(browser, "dog_name").find_element(By.CSS_SELECTOR, ".label").text == "Dog name"
    brother = _card(browser, BROTHER_KEY)
    assert brother.find_element(By.CSS_SELECTOR, ".label").text == "Subject fact: other"
    assert brother.find_element(By.CSS_SELECTOR, ".key").text == BROTHER_KEY
    shot("02-memories.png")

    # Search: the one good match; the weak ones fall below the relevance cut-off.
    browser.find_element(By.ID, "query").send_keys("Biscuit")
    browser.find_element(By.ID, "search").click()
    _status(browser, "1 result, 4 below the cut-off hidden.")
    assert _texts(browser, "li.memory .key") == ["dog_name"]
    assert browser.find_element(By.ID, "weak-note").is_displayed()
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

    # History of the edited memory, beside the list: each change's values and who made it.
    _click(browser, "dog_name", "history")
    _status(browser, "events.")
    assert _in_view(browser, "history-panel")
    assert browser.find_element(By.ID, "history-of").text == "of Dog name"
    # Newest first: the edit, the links the index made to similar memories, the first version.
    update = browser.find_element(By.CSS_SELECTOR, '#history li.event[data-event="UPDATE"]')
    add = browser.find_element(By.CSS_SELECTOR, '#history li.event[data-event="ADD"]')
    assert update.find_element(By.CSS_SELECTOR, ".event-kind").text == "Edited"
    assert update.find_element(By.CSS_SELECTOR, ".old").text == VALUES["dog_name"]
    assert update.find_element(By.CSS_SELECTOR, ".new").text == NEW_VALUE
    assert update.find_element(By.CSS_SELECTOR, ".actor").text == "api"
    assert f"{VALUES['dog_name']} → {NEW_VALUE}" in update.text
    assert add.get_attribute("data-event") == "ADD"
    assert add.find_element(By.CSS_SELECTOR, ".new").text == VALUES["dog_name"]
    assert add.find_element(By.CSS_SELECTOR, ".actor").text == "seed"
    assert "selected" in (_card(browser, "dog_name").get_attribute("class") or "")
    shot("04-history.png")

    # Toggle private → shared → private, in the full list.
    browser.find_element(By.ID, "list").click()
    _status(browser, "Memories 1–5.")
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

    # Pending proposals, beside the list once the history is closed: confirm one, reject the
    # other.
    browser.find_element(By.ID, "close-history").click()
    assert not browser.find_element(By.ID, "history-panel").is_displayed()
    assert _in_view(browser, "proposals-panel")
    assert browser.find_element(By.ID, "proposal-count").text == "(2)"
    proposals = browser.find_elements(By.CSS_SELECTOR, "#proposals li.proposal")
    assert sorted(p.find_element(By.CSS_SELECTOR, ".proposed").text for p in proposals) == sorted(
        PROPOSED.values()
    )
    assert sorted(p.find_element(By.CSS_SELECTOR, ".label").text for p in proposals) == [
        "City",
        "Doctor",
    ]
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


def test_long_lists_page_and_weak_matches_hide_in_a_real_browser(
    served: Served, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()

    def shot(name: str) -> None:
        assert browser.save_screenshot(str(shots / name))

    _sign_in(browser, served)

    # A value that looks like markup stays text, in its card and in its history.
    _open_user(browser, "bob")
    note = _card(browser, "note")
    assert note.find_element(By.CSS_SELECTOR, ".value").text == HOSTILE
    assert note.find_element(By.CSS_SELECTOR, ".label").text == "Note"
    _click(browser, "note", "history")
    _status(browser, "event")
    added = browser.find_element(By.CSS_SELECTOR, '#history li.event[data-event="ADD"]')
    assert added.find_element(By.CSS_SELECTOR, ".new").text == HOSTILE
    assert browser.find_elements(By.CSS_SELECTOR, "#review img, #review b") == []
    assert browser.execute_script("return window.pwned === undefined")

    _open_user(browser, "cy")

    # 25 memories: two pages of at most 20.
    _status(browser, "Memories 1–20, more on the next page.")
    first_page = _texts(browser, "li.memory .key")
    assert len(first_page) == PAGE_SIZE
    assert browser.find_element(By.ID, "page-info").text == "Page 1 · memories 1–20"
    assert not browser.find_element(By.ID, "prev").is_enabled()
    shot("01-list-page-1.png")
    browser.find_element(By.ID, "next").click()
    _status(browser, "Memories 21–25.")
    second_page = _texts(browser, "li.memory .key")
    assert len(second_page) == len(PREFERENCES) - PAGE_SIZE
    assert set(first_page) | set(second_page) == set(PREFERENCES)
    assert not browser.find_element(By.ID, "next").is_enabled()
    shot("02-list-page-2.png")
    browser.find_element(By.ID, "prev").click()
    _status(browser, "Memories 1–20, more on the next page.")
    assert _texts(browser, "li.memory .key") == first_page

    # History beside a long list: open from the last card of the page, the panel is in view.
    _click(browser, first_page[-1], "history")
    _status(browser, "event")
    assert _in_view(browser, "history-panel")
    added = browser.find_element(By.CSS_SELECTOR, '#history li.event[data-event="ADD"]')
    assert added.find_element(By.CSS_SELECTOR, ".new").text == PREFERENCES[first_page[-1]]
    assert added.find_element(By.CSS_SELECTOR, ".actor").text == "(not recorded)"
    shot("03-history-beside-the-list.png")

    # Search: every preference is returned, most of them barely related; the default cut-off
    # (half the best score) keeps the dog memories and hides the rest.
    sdk = served.services.sdk
    assert sdk is not None
    ranked = sdk.search("dog", user_id="cy", account_id="acme", top_k=100)
    assert len(ranked) == len(PREFERENCES)
    best = ranked[0].score
    strong = [r.memory.key for r in ranked if r.score >= best / 2]
    assert sorted(strong) == ["dog_breed", "dog_food", "dog_walks"]
    weak = len(ranked) - len(strong)
    assert min(r.score for r in ranked) < 0.05 * 2  # the low scores the cut-off is for
    browser.find_element(By.ID, "query").send_keys("dog")
    browser.find_element(By.ID, "search").click()
    _status(browser, f"3 results, {weak} below the cut-off hidden.")
    assert _texts(browser, "li.memory .key") == strong
    scores = [
        float(e.get_attribute("data-score") or "nan")
        for e in browser.find_elements(By.CSS_SELECTOR, "li.memory")
    ]
    assert all(score >= best / 2 for score in scores)
    assert browser.find_element(By.ID, "weak-count").text == (
        f"{weak} weaker matches below the cut-off hidden."
    )
    assert not browser.find_element(By.ID, "pager").is_displayed()
    shot("04-search-cut-off.png")

    # Shown on request, the weak matches page like a list.
    browser.find_element(By.ID, "show-weak").click()
    _status(browser, f"{len(PREFERENCES)} results.")
    assert Select(browser.find_element(By.ID, "cutoff")).first_selected_option.text == (
        "no cut-off"
    )
    assert _texts(browser, "li.memory .key") == [r.memory.key for r in ranked[:PAGE_SIZE]]
    assert browser.find_element(By.ID, "page-info").text == "Page 1 of 2"
    browser.find_element(By.ID, "next").click()
    _wait(browser).until(lambda d: d.find_element(By.ID, "page-info").text == "Page 2 of 2")
    assert _texts(browser, "li.memory .key") == [r.memory.key for r in ranked[PAGE_SIZE:]]
    shot("05-search-page-2.png")

    # A narrow window stacks the panel above the list and scrolls it into view on a click.
    browser.set_window_size(700, 900)
    last = _texts(browser, "li.memory .key")[-1]
    _click(browser, last, "history")
    _wait(browser).until(
        lambda d: d.find_element(By.ID, "history-of").text == f"of {last.capitalize()}"
    )
    assert _in_view(browser, "history-panel")
    shot("06-narrow-history.png")

    # Signing out leaves nothing read under the key in the page.
    browser.find_element(By.ID, "sign-out").click()
    _status(browser, "Signed out.")
    assert browser.find_elements(By.CSS_SELECTOR, "li.memory, li.event, #user-select option") == []

    # Values, and the query, went only in bodies: the history fetched versions by id.
    secrets = [*PREFERENCES.values(), HOSTILE, "dog"]
    assert any(p.startswith("/v1/memories/") for p in served.paths)
    for path in served.paths:
        assert not any(s in path or quote(s) in path for s in secrets), path
    saved = sorted(p.name for p in shots.iterdir())
    assert saved == [
        "01-list-page-1.png",
        "02-list-page-2.png",
        "03-history-beside-the-list.png",
        "04-search-cut-off.png",
        "05-search-page-2.png",
        "06-narrow-history.png",
    ]
    print(f"screenshots in {shots}: {', '.join(saved)}")
