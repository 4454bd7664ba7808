"""The image's command lines, outside a container (no container engine runs on these machines):
the Dockerfile's ENV, WORKDIR, ENTRYPOINT + CMD and HEALTHCHECK are read from the file and run
in a network namespace of their own (`unshare -rn`, loopback only), so the image's listener on
0.0.0.0 is what `docker run -p 4318:4318` would reach, and nothing outside the test sees it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).parents[1] / "Dockerfile"
TOKEN = "an-ingest-token-for-the-image"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    joined, lines = "", []
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        joined += line.rstrip().removesuffix("\\") + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            lines.append(joined)
            joined = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in lines]


def image() -> dict:
    """What the final stage declares: env, workdir, user, volumes, entrypoint, cmd, healthcheck."""
    declared: dict = {"env": {}, "volumes": []}
    for name, args in instructions():
        if name == "ENV":
            declared["env"].update(dict(pair.split("=", 1) for pair in shlex.split(args)))
        elif name in ("WORKDIR", "USER"):
            declared[name.lower()] = args
        elif name == "VOLUME":
            declared["volumes"] += json.loads(args)
        elif name in ("ENTRYPOINT", "CMD"):
            declared[name.lower()] = json.loads(args)
        elif name == "HEALTHCHECK":
            declared["healthcheck"] = json.loads(args.split(" CMD ", 1)[1])
    return declared


def local(command: list[str]) -> list[str]:
    """The image's `ragmon` executable is this interpreter's ragmon."""
    assert command[0] == "ragmon"
    return [sys.executable, "-m", "ragmon", *command[1:]]


def in_network_namespace(scratch: Path, extra_env: dict[str, str]) -> dict:
    done = subprocess.run(
        ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, __file__,
         json.dumps({"scratch": str(scratch), "env": extra_env})],
        capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(DOCKERFILE.parent)})
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_image_runs_as_a_user_and_declares_where_it_writes():
    declared = image()
    assert declared["user"].isdigit() and int(declared["user"]) != 0
    assert set(declared["volumes"]) == {"/data", "/tmp"} and declared["workdir"] == "/data"
    assert declared["entrypoint"] == ["ragmon"] and declared["cmd"] == ["serve"]


@pytest.mark.slow
def test_the_image_command_listens_on_every_address_only_with_a_token_and_its_healthcheck_follows(tmp_path):
    refused = in_network_namespace(tmp_path / "without", {})
    assert refused["exit"] == 2 and "token" in refused["log"] and not refused["healthy_at"]
    served = in_network_namespace(tmp_path / "with", {"RAGMON_HTTP__TOKEN": TOKEN})
    assert served["unhealthy_before_start"] == 1
    assert served["healthy_at"] is not None and served["healthy_at"] < 60, served
    assert "serving on http://0.0.0.0:4318" in served["log"], served["log"]
    assert served["exit"] == -signal.SIGTERM and "Traceback" not in served["log"]


def _run_inside(scratch: Path, extra_env: dict[str, str]) -> dict:
    """In the namespace: the image's command as `docker run` starts it, its HEALTHCHECK polled."""
    declared = image()
    workdir = scratch / declared["workdir"].lstrip("/")
    workdir.mkdir(parents=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
           **declared["env"], **extra_env}
    health = local(declared["healthcheck"])
    result = {"unhealthy_before_start": subprocess.run(health, env=env, cwd=workdir, capture_output=True).returncode}
    log_path = scratch / "container.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(local(declared["entrypoint"] + declared["cmd"]), env=env, cwd=workdir,
                                  stdout=log, stderr=subprocess.STDOUT)
    started, healthy_at = time.monotonic(), None
    while server.poll() is None and time.monotonic() - started < 60:
        if subprocess.run(health, env=env, cwd=workdir, capture_output=True).returncode == 0:
            healthy_at = time.monotonic() - started
            break
        time.sleep(0.5)
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    result |= {"healthy_at": healthy_at, "exit": server.wait(60), "log": log_path.read_text(errors="replace")}
    return result


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    print(json.dumps(_run_inside(Path(spec["scratch"]), spec["env"])))
