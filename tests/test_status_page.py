"""The status page in a real browser (Debian's Chromium, driven through its WebDriver): a leak
posted to a running ``ragmon serve`` shows on the page without a reload by hand (the page
refreshes itself every 3 s), its trace link opens the trace's findings, and the browser logs no
error."""

from __future__ import annotations

import json
import shutil
import time

import httpx
import pytest

from ragmon.monitor.app.status_page import REFRESH_SECONDS
from tests.ragmon_process import RagmonServer
from tests.test_findings import _events

pytestmark = pytest.mark.integration

# as the machine's notes start it: headless, and nothing reaching for the network on its own
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium and chromedriver are missing: run tests/services/install.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    session.set_page_load_timeout(30)
    try:
        yield session
    finally:
        session.quit()


def _replaced(error: Exception) -> bool:
    """Whether ``error`` says the element went with the page a refresh replaced. Chromedriver says
    it in one of three ways: no such element, a stale element, or, when the refresh lands between
    finding the element and reading it, an inspector error on a node no longer in the document."""
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        WebDriverException,
    )

    return isinstance(error, NoSuchElementException | StaleElementReferenceException) or (
        isinstance(error, WebDriverException) and "does not belong to the document" in (error.msg or ""))


def _text(browser) -> str:
    """The page's text; empty while a refresh replaces the page."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        return browser.find_element(By.TAG_NAME, "body").text
    except WebDriverException as error:
        if not _replaced(error):
            raise
        return ""


def _click(browser, link_text: str) -> None:
    """Click a link of the status page; again if a refresh replaced the page meanwhile."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    for _ in range(10):
        try:
            browser.find_element(By.LINK_TEXT, link_text).click()
            return
        except WebDriverException as error:
            if not _replaced(error):
                raise
            time.sleep(0.2)
    raise AssertionError(f"no link {link_text!r} on the page")


def test_a_leak_shows_on_the_status_page_and_its_trace_opens(tmp_path, browser):
    from selenium.webdriver.common.by import By

    with RagmonServer(tmp_path) as server:
        browser.get(f"{server.url}/")
        assert browser.title == "ragmon status"
        assert "permission_violation" not in browser.find_element(By.TAG_NAME, "body").text
        # the page reloads itself (a new leak shows within a refresh of being processed)
        refresh = browser.find_element(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]').get_attribute("content")
        assert refresh == str(REFRESH_SECONDS)
        answer = httpx.post(f"{server.url}/v1/events", content="\n".join(json.dumps(e) for e in _events(time.time())),
                            headers={"content-type": "application/x-ndjson"})
        assert answer.status_code == 200 and answer.json()["accepted"] == 4
        posted = time.monotonic()
        while "permission_violation" not in (body := _text(browser)):
            # the refresh period above bounds it; no time asserted: a loaded machine may take a few
            assert time.monotonic() - posted < 60, "the leak did not show on the refreshing page"
            time.sleep(0.1)
        assert "catalog ACL [group:payroll] excludes the caller" in body and "alice" not in body

        _click(browser, "leak-1")
        assert browser.title == "ragmon trace leak-1"
        page = browser.find_element(By.TAG_NAME, "body").text
        assert page.count("permission_violation") == 3 and "unsupported_citation" in page  # 2 findings, 1 stratum
        assert "strata permission_violation" in page
        browser.find_element(By.LINK_TEXT, "← status").click()
        assert browser.title == "ragmon status"
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
