"""The status page in a real browser (Debian's Chromium, driven through its WebDriver): a leak
posted to a running ``ragmon serve`` shows on the page without a reload by hand (the page
refreshes itself every 3 s), its trace link opens the trace's findings, the page renders under
its Content-Security-Policy, and the browser logs no error. A store filled by hostile traffic (a
finding naming 400 long groups, 1,000 queued samples, 1,000 tenants) keeps the page small, and a
page on a DNS name rebound to the loopback address cannot read the port; beside these, the
bounds read from a runtime in this process."""

from __future__ import annotations

import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event

from ragmon.monitor.app.findings_view import ReadView
from ragmon.monitor.app.status_page import CELL_CHARS, LATEST_FINDINGS, REFRESH_SECONDS, StatusPage
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.labeling.sample_store import NewSample
from tests.ragmon_process import RagmonServer
from tests.services.harness import free_port
from tests.test_findings import _events

# The page of the hostile store below (20 findings and 50 tenant-index rows listed, each cell at
# most CELL_CHARS characters) measured 19.7 KB; before the bounds it was 226 KB, most of it the
# reason of the one finding naming 400 long groups.
PAGE_BYTES = 32 * 1024

# as the machine's notes start it: headless, and nothing reaching for the network on its own
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")


def chromium(tmp_path, *flags: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.fail("chromium and chromedriver are missing: run tests/services/install.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *flags):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    session.set_page_load_timeout(30)
    return session


@pytest.fixture
def browser(tmp_path):
    session = chromium(tmp_path)
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture
def rebinding_browser(tmp_path):
    """A browser that resolves rebind.test to 127.0.0.1, as a DNS name an attacker rebound would."""
    session = chromium(tmp_path, "--host-resolver-rules=MAP rebind.test 127.0.0.1")
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


@pytest.mark.integration
def test_a_leak_shows_on_the_status_page_and_its_trace_opens(tmp_path, browser):
    from selenium.webdriver.common.by import By

    with RagmonServer(tmp_path) as server:
        browser.get(f"{server.url}/")
        assert browser.title == "ragmon status"
        assert "permission_violation" not in browser.find_element(By.TAG_NAME, "body").text
        # the page reloads itself (a new leak shows within a refresh of being processed)
        refresh = browser.find_element(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]').get_attribute("content")
        assert refresh == str(REFRESH_SECONDS)
        # its inline style applies under the Content-Security-Policy (which allows no script)
        assert browser.execute_script("return getComputedStyle(document.body).fontSize") == "14px"
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


class _AttackerPage(BaseHTTPRequestHandler):
    """What the attacker's server answers at rebind.test before the name points at 127.0.0.1."""

    # Chromium opens sockets ahead of need; one left idle would otherwise outlive the attacker's
    # server in its handler thread and answer the page's later fetch itself
    timeout = 1.0

    def do_GET(self) -> None:
        body = b"<!doctype html><title>cat pictures</title><p>nothing to see</p>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class _AttackerServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close waits for every connection's thread: none is left to answer


@pytest.mark.integration
def test_a_page_on_a_rebound_name_cannot_read_the_findings(tmp_path, rebinding_browser):
    """DNS rebinding: the attacker's page loads from its server at http://rebind.test:PORT/, then the
    name answers 127.0.0.1, where ragmon listens on that port: the page's script is same-origin
    with ragmon, and its fetch of the findings reaches ragmon, naming rebind.test as the Host."""
    port = free_port()
    attacker = _AttackerServer(("127.0.0.1", port), _AttackerPage)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    rebinding_browser.get(f"http://rebind.test:{port}/")
    assert rebinding_browser.title == "cat pictures"
    attacker.shutdown()
    attacker.server_close()
    server = RagmonServer(tmp_path)
    server.port, server.url = port, f"http://127.0.0.1:{port}"
    with server:
        answer = httpx.post(f"{server.url}/v1/events", content="\n".join(json.dumps(e) for e in _events(time.time())),
                            headers={"content-type": "application/x-ndjson"})
        assert answer.status_code == 200
        assert httpx.get(f"{server.url}/api/v1/findings").json()["findings"]  # there is something to steal
        status, body = rebinding_browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/api/v1/findings').then(r => r.text().then(t => done([r.status, t])))"
            ".catch(e => done(['failed', String(e)]));")
    assert status == 421, (status, body[:300])
    assert "permission_violation" not in body and "http.allowed_hosts" in body


def _long_groups_leak(now: float, tenant: str, trace_id: str, groups: int = 0) -> dict:
    """A trace whose caller (in ``groups`` groups of 250 characters, besides staff) got a passage
    only the board may read, in the context."""
    passage = {"id": "minutes#1", "doc_id": "minutes", "doc_version": "v1", "score": 0.9, "acl": ["group:board"],
               "indexed_at": now - 60, "source_modified_at": now - 120}  # judged for freshness too: no not_judged
    names = ["staff", *(f"g{i:03d}-" + "x" * 245 for i in range(groups))]
    return {"type": "trace", "trace_id": trace_id, "time": now - 5, "tenant": tenant,
            "caller": {"id": "u-1", "groups": names}, "index": {"name": "hr"}, "query": f"question {trace_id}",
            "retrievals": [{"retriever": "vector", "passages": [passage]}], "context": [passage],
            "answer": {"text": "no"}}


@pytest.mark.integration
def test_a_hostile_store_keeps_the_page_small_and_it_renders(tmp_path, browser):
    """1,000 tenants each leaking once (1,000 queued samples, 1,000 findings, 51 tenant label
    values), then one leak by a caller in 400 groups of 250 characters: the page stays under
    PAGE_BYTES, says how much it leaves out, and renders in Chromium without an error."""
    from selenium.webdriver.common.by import By

    now = time.time()
    events = [_long_groups_leak(now, f"tenant-{i:04d}", f"leak-{i:04d}") for i in range(1000)]
    events.append(_long_groups_leak(now, "acme", "many-groups", groups=400))
    with RagmonServer(tmp_path, RAGMON_FINDINGS__PER_SIGNAL_PER_SECOND="1000") as server:
        for start in range(0, len(events), 250):
            answer = httpx.post(f"{server.url}/v1/events", timeout=60, headers={"content-type": "application/x-ndjson"},
                                content="\n".join(json.dumps(e) for e in events[start:start + 250]))
            assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text
        page = httpx.get(f"{server.url}/", timeout=30)
        assert page.status_code == 200
        assert "queued 1001" in page.text and "permission_violation</td><td class=\"n\">1001" in page.text
        assert len(page.content) < PAGE_BYTES, len(page.content)
        assert "many-groups" in page.text and "…" in page.text  # the reason naming 400 groups, cut
        assert f"{LATEST_FINDINGS} of 2,002 shown" in page.text  # a leak at candidates and one at context each
        assert "50 of 51 shown" in page.text  # tenant label values: the first 50 and `other`

        browser.get(f"{server.url}/")
        assert browser.title == "ragmon status"
        body = browser.find_element(By.TAG_NAME, "body").text
        assert f"{LATEST_FINDINGS} of 2,002 shown" in body
        assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []


@pytest.fixture
def runtime(tmp_path):
    """A runtime of this process on a SQLite file, as ``serve`` builds it."""
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")})
    built = build_runtime(settings, registry=CollectorRegistry())
    try:
        yield built
    finally:
        built.close()


def _finding(n: int, trace_id: str, reason: str = "catalog ACL [group:board] excludes the caller") -> dict:
    return {"key": f"k{n}", "trace_id": trace_id, "time": 1_800_000_000.0 + n, "recorded_at": 1_800_000_000.0 + n,
            "tenant": "acme", "index_name": "hr", "caller": "", "signal": "permission_violation", "stage": "context",
            "passage_ids": ["minutes#1"], "documents": [["minutes", "v1"]], "reason": reason}


def test_the_labeling_queue_is_read_as_counts_never_as_payloads(runtime):
    runtime.samples.upsert([NewSample(f"t{i}", f"tenant-{i % 7}", "2026-W48", {"random"} | ({"low_score"} if i % 4 else
                                      set()), "dev", f"f{i}", 0.0, {"query": "q" * 2000}) for i in range(1000)])
    statements: list[str] = []
    event.listen(runtime.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    page = StatusPage(runtime).render()
    assert "random</td><td class=\"n\">1000" in page and "low_score</td><td class=\"n\">750" in page
    assert [s for s in statements if "payload" in s] == []


def test_long_cells_are_cut_and_a_table_says_how_many_it_left_out(runtime):
    groups = ", ".join(f"group:g{i:03d}-" + "x" * 245 for i in range(400))
    runtime.findings.add([_finding(n, f"trace-{n}") for n in range(29)]
                         + [_finding(29, "many-groups", f"catalog ACL [group:board] excludes the caller [{groups}]")])
    page = StatusPage(runtime).render()
    assert len(page) < PAGE_BYTES, len(page)
    assert f"{LATEST_FINDINGS} of 30 shown" in page and 'href="/api/v1/findings"' in page
    cut = page[page.index("catalog ACL [group:board] excludes the caller [group:g000"):]
    assert cut[:cut.index("</td>")].endswith("…") and len(cut[:cut.index("</td>")]) == CELL_CHARS


def test_a_trace_page_is_found_by_its_raw_id_and_by_its_shown_id(runtime):
    raw = "collide-alice@example.com"
    shown = runtime.redactor.shown_id(raw)
    assert shown != raw and "alice" not in shown
    runtime.findings.add([_finding(1, shown)])
    runtime.samples.upsert([NewSample(shown, "acme", "2026-W48", {"permission_violation"}, "dev", "f", 0.0, {})])
    pages = ReadView(runtime)
    for asked in (raw, shown):
        page = pages.trace_page(asked)
        assert page is not None and f"trace {shown}" in page and "alice" not in page
        assert "strata permission_violation" in page
    assert pages.trace_page("collide-bob@example.org") is None  # redacts alike, a trace of its own


def test_the_catalog_table_shows_index_names_and_document_ids_by_their_shown_ids(runtime):
    """The catalog holds ids as their senders named them; the page shows them as every other
    surface does (a private index name and a stale document's id become shown ids)."""
    from ragmon.monitor.core.model import DocumentEvent, IndexEvent

    now = time.time()
    runtime.catalog.apply(IndexEvent(index="idx-carol@example.org", doc_id="bob@example.com", version="v1",
                                     indexed_at=now - 7200))
    runtime.catalog.apply(DocumentEvent(doc_id="bob@example.com", version="v2", modified_at=now - 3600))
    page = StatusPage(runtime).render()
    shown = runtime.redactor.shown_id
    assert "carol" not in page and "bob@" not in page
    assert f"<td>{shown('idx-carol@example.org')}</td>" in page and shown("bob@example.com") in page
