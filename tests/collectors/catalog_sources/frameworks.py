"""Running the frameworks' own writers (``writers/``) in the frameworks' environment, so that the stores a
catalog source reads are written as the frameworks write them; each prints what the framework answered."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.services.harness import clients_python

WRITERS = Path(__file__).parent / "writers"


def write(writer: str, plan: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """Run ``writers/<writer>.py`` with ``plan``; what it printed (the framework's return values)."""
    plan_file = scratch / f"{writer}-plan.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run([str(clients_python()), str(WRITERS / f"{writer}.py"), str(plan_file)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{writer} failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])
