"""The labeling page a labeler sees, in a real browser (Debian's Chromium through its WebDriver) on
a real Label Studio: a third turn's task, made as the weekly batch makes it and pushed into a
project with ragmon's labeling config, shows each earlier turn (message, searched query, answer)
in order before the user's message, and the message beside what was searched for it. Expected
strings come from the sample written here."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from ragmon.exporters.label_studio import LabelStudio as Client
from ragmon.monitor.labeling.batch import LABEL_CONFIG, task_of
from tests.test_status_page import chromium

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("label-studio")]

# The earlier turns of the third turn, as a sample keeps them (docs/sampling.md); every text distinct,
# none inside another, so that where each shows on the page is where that one is
HISTORY = [{"turn": 1, "time": 1764410000.0, "trace_id": "t-first", "message": "How many vacation days carry over?",
            "searched": ["annual leave carry-over allowance"], "answer": "Five days carry over."},
           {"turn": 2, "time": 1764410040.0, "trace_id": "t-second", "message": "and for part-timers?",
            "searched": ["part-time staff leave carry-over", "pro rata leave for part-timers"],
            "answer": "The same five days, pro rata."}]
MESSAGE = "and contractors?"
SEARCHED = "contractor vacation carry-over rules"
PASSAGE = "Contractors' vacation days do not carry over."


def follow_up_sample():
    """A third turn whose retriever searched a rewritten query, with its two earlier turns (the
    second searched two queries, as a multi-query retriever does)."""
    payload = {"trace_id": "t-third", "time": 1764410100.0, "tenant": "acme", "query": MESSAGE, "turn": 3,
               "conversation_id": "c-k3", "history": HISTORY, "index": {"name": "handbook", "version": "2026-11"},
               "caller": {"id": "user:~k1", "groups": ["staff"]},
               "retrievals": [{"retriever": "vector", "query": SEARCHED,
                               "passages": [{"id": "contractor-leave#1", "doc_id": "contractor-leave",
                                             "doc_version": "1", "text": PASSAGE}]}],
               "answer": {"text": "Contractors do not carry days over."}}
    return SimpleNamespace(trace_id="t-third", payload=payload, tenant="acme", strata=["random"], split="dev",
                           week="2026-W48")


@pytest.fixture
def browser(tmp_path):
    session = chromium(tmp_path, "--window-size=1400,2400")
    try:
        yield session
    finally:
        session.quit()


def log_in(browser, label_studio) -> None:
    """Through Label Studio's login form, as a labeler does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{label_studio.url}/user/login/")
    browser.find_element(By.NAME, "email").send_keys(label_studio.email)
    browser.find_element(By.NAME, "password").send_keys(label_studio.password)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit], form input[type=submit]").click()
    WebDriverWait(browser, 30).until(expected_conditions.url_changes(f"{label_studio.url}/user/login/"))
    assert "/user/login" not in browser.current_url, "the login form did not log in"


def shown_text(browser, wanted: str, timeout: float = 40.0) -> str:
    """The page's text once the labeling interface shows ``wanted`` (it renders after the page loads)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def text(driver):
        body = driver.find_element(By.TAG_NAME, "body").text
        return body if wanted in body else False

    try:
        return WebDriverWait(browser, timeout, poll_frequency=0.3).until(text)
    except TimeoutException:
        raise AssertionError(f"{wanted!r} never showed; the page read:\n"
                             f"{browser.find_element(By.TAG_NAME, 'body').text}") from None


def test_a_follow_ups_labeling_page_shows_its_earlier_turns_then_the_message_beside_its_search(
        tmp_path, label_studio, browser):
    from selenium.webdriver.common.by import By

    with Client(label_studio.url, label_studio.personal_access_token()) as studio:
        project_id, _ = studio.ensure_project(f"labeling page {uuid.uuid4().hex[:8]}", LABEL_CONFIG)
        assert studio.import_tasks(project_id, [task_of(follow_up_sample())]) == 1
        [task] = studio.export(project_id)

    log_in(browser, label_studio)
    browser.get(f"{label_studio.url}/projects/{project_id}/data?task={task['id']}")
    page = shown_text(browser, PASSAGE)  # the last of the task's texts: the rest rendered before it
    browser.save_screenshot(str(tmp_path / "labeling-page.png"))

    # each earlier turn, oldest first, then the user's message and what was searched for it
    expected = [text for turn in HISTORY for text in (turn["message"], *turn["searched"], turn["answer"])]
    at = 0
    for text in [*expected, MESSAGE, SEARCHED]:
        found = page.find(text, at)
        assert found >= 0, f"{text!r} is not on the page after what came before it:\n{page}"
        at = found + len(text)

    # the message and its search side by side: one row, the message on the left (the labeling
    # interface's texts, after the first turn's: the task list beside it shows the message too)
    first = HISTORY[0]["message"]

    def box(text: str) -> dict:
        [element] = browser.find_elements(By.XPATH, f"//*[contains(text(), {first!r})]/following::*[text()={text!r}]")
        return element.rect

    message, searched = box(MESSAGE), box(SEARCHED)
    assert message["x"] + message["width"] <= searched["x"], (message, searched)
    assert abs(message["y"] - searched["y"]) < message["height"] + searched["height"], (message, searched)
