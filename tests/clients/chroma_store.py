"""A folder of markdown policies and the app that indexes it into a persistent Chroma store
(apps/chroma_catalog_app.py), run in the frameworks' environment: what the Chroma catalog tests share."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.clients.conftest import APPS
from tests.services.harness import clients_python


def markdown(acl: list[str], body: str) -> str:
    """A policy whose front matter names its readers."""
    return f"---\nacl: [{', '.join(acl)}]\n---\n# Policy\n{body}\n"


def blob_id(path: Path) -> str:
    data = path.read_bytes()  # git hash-object, as the folder source's docs give it
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def run_chroma_app(tmp_path: Path, mode: str, plan: dict[str, Any], exports: tuple[str, ...] = (),
                   tenant: str = "acme") -> dict[str, Any]:
    """Run apps/chroma_catalog_app.py in ``mode`` (ingest, ask) with ``plan``; what it printed."""
    plan_file = tmp_path / f"chroma-{mode}-{time.monotonic_ns()}.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run([str(clients_python()), str(APPS / "chroma_catalog_app.py"), "--mode", mode, "--tenant",
                           tenant, "--plan", str(plan_file), *exports], capture_output=True, text=True, timeout=300,
                          cwd=APPS)
    assert done.returncode == 0, f"chroma_catalog_app {mode} failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])
