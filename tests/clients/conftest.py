"""Real RAG frameworks, instrumented as their users instrument them, exporting to real `ragmon serve`
processes: one server per span processor and encoding (batch and simple, protobuf and JSON), all
four fed by the same app run through one TracerProvider."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.agreement import AppRun, snapshot
from tests.ragmon_process import RagmonServer
from tests.services.harness import clients_python

APPS = Path(__file__).parent / "apps"
EXPORTS = ("batch:protobuf", "simple:protobuf", "batch:json", "simple:json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs real frameworks (installed by tests/services/install.sh) against real servers."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def ragmon_servers(tmp_path_factory) -> Iterator[dict[str, RagmonServer]]:
    """Every trace is sampled (random rate 1), so the stored sample shows what ragmon made of each."""
    servers: dict[str, RagmonServer] = {}
    try:
        for export in EXPORTS:
            scratch = tmp_path_factory.mktemp(export.replace(":", "-"))
            # the default assembly wait: a trace the batch span processor splits between two
            # exports (every 5 s) arrives in two requests about 5 s apart
            servers[export] = RagmonServer(scratch, RAGMON_SAMPLING__RATES='{"random": 1.0}').start()
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def send_events(servers: dict[str, RagmonServer], events: list[dict[str, Any]]) -> None:
    """Native events (the catalog) to every server, before the app runs."""
    for server in servers.values():
        answer = httpx.post(f"{server.url}/v1/events", json=events, timeout=30)
        assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text


def run_app(name: str, servers: dict[str, RagmonServer], plan: dict[str, Any], tmp_path: Path,
            timeout: float = 300, options: tuple[str, ...] = ()) -> AppRun:
    """Send the plan's catalog to every server, then run ``apps/<name>.py`` in the frameworks'
    environment with ``plan`` (and the app's own ``options``)."""
    send_events(servers, plan["catalog"])
    before = snapshot(servers)
    plan_file = tmp_path / f"{name}-plan.json"
    plan_file.write_text(json.dumps(plan))
    exports = [arg for export, server in servers.items() for arg in ("--export", f"{export}={server.url}")]
    done = subprocess.run([str(clients_python()), str(APPS / f"{name}.py"), "--tenant", plan["tenant"],
                           "--plan", str(plan_file), *exports, *options],
                          capture_output=True, text=True, timeout=timeout, cwd=APPS)
    assert done.returncode == 0, f"{name} failed:\n{done.stderr[-4000:]}"
    return AppRun(plan, json.loads(done.stdout.strip().splitlines()[-1]), before)
