"""The chart as a kubelet runs it, under the release names users pick (`ragmon`, `ragmon-prod`,
`rag`): each rendered container's command line is run with the environment a kubelet builds for it
(its env and Secret references resolved, plus the variables Kubernetes sets for every rendered
Service, tests/kubelet_env.py: a `ragmon` Service makes RAGMON_SERVICE_HOST, RAGMON_PORT, ...), its
ConfigMap mounted at /etc/ragmon and /data in a scratch directory; the collector is started before
the migration hook has run, as on a first install whose hook is slow, and must wait for it.

One deviation from the pod, required on this machine: the mounted config's `http.host: 0.0.0.0`
is read as 127.0.0.1 (servers here listen on loopback only)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from tests.collectors.kafka_support import new_topic
from tests.helm.test_chart import CHART, KUBE, helm
from tests.kubelet_env import MASTER, service_links, with_cluster_ips
from tests.services.harness import free_port

pytestmark = pytest.mark.integration

RELEASES = ["ragmon", "ragmon-prod", "rag"]


# kafka-python 3.0.12 may log one traceback of its own while a consumer closes: its socket reader
# runs once more after the socket is gone. Not ragmon's code and nothing is lost; every other
# traceback in a pod's log fails the test.
KAFKA_CLOSE_RACE = re.compile(
    r"^\S+ \S+ ERROR kafka\.net\.transport: .*: Error receiving network data closing socket\n"
    r"Traceback \(most recent call last\):\n(?:  .*\n)+AttributeError: 'NoneType' object has no attribute 'recv'\n",
    re.MULTILINE)


def without_kafka_close_race(log: str) -> str:
    return KAFKA_CLOSE_RACE.sub("", log)


def render(release: str, *args: str) -> list[dict]:
    done = helm("template", release, str(CHART), "--namespace", "monitoring", "--kube-version", KUBE,
                "--set", "auth.existingSecret=ragmon-auth", *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


class Pod:
    """One rendered pod's container, run here as a kubelet would start it."""

    def __init__(self, manifest: dict, services: list[dict], secrets: dict[tuple[str, str], str],
                 config_maps: dict[str, dict[str, str]], root: Path) -> None:
        template = manifest["spec"]["template"]
        self.name = manifest["metadata"]["name"]
        self.spec = template["spec"]
        [self.container] = self.spec["containers"]
        self.root = root / self.name
        self.root.mkdir(parents=True)
        self.env = self._environment(services, secrets)
        self._mount(config_maps)
        self.log_path = self.root / "container.log"
        self.process: subprocess.Popen | None = None

    def _environment(self, services: list[dict], secrets: dict[tuple[str, str], str]) -> dict[str, str]:
        # what the image sets, then the Service links, then the container's own env (which wins);
        # the links as with enableServiceLinks true: what the loader must survive should a pod get them
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(self.root),
               "HOSTNAME": f"{self.name}-7d9f8-x2x9k", **service_links([MASTER, *services])}
        for source in self.container.get("envFrom", []):
            raise AssertionError(f"no Secret to resolve for envFrom {source}")
        for variable in self.container.get("env", []):
            if "value" in variable:
                env[variable["name"]] = variable["value"]
            else:
                ref = variable["valueFrom"]["secretKeyRef"]
                env[variable["name"]] = secrets[(ref["name"], ref["key"])]
        return env

    def _mount(self, config_maps: dict[str, dict[str, str]]) -> None:
        (self.root / "data").mkdir()
        (self.root / "tmp").mkdir()
        for volume in self.spec["volumes"]:
            if "configMap" in volume:
                mount = next(m for m in self.container["volumeMounts"] if m["name"] == volume["name"])
                directory = self.path(mount["mountPath"])
                directory.mkdir(parents=True)
                for name, text in config_maps[volume["configMap"]["name"]].items():
                    text = text.replace("host: 0.0.0.0", "host: 127.0.0.1").replace(" /data/", f" {self.root}/data/")
                    (directory / name).write_text(text)

    def path(self, pod_path: str) -> Path:
        return self.root / pod_path.lstrip("/")

    def command(self) -> list[str]:
        line = [*self.container["command"], *self.container.get("args", [])]
        assert line[0] == "ragmon"
        return [sys.executable, "-m", "ragmon",
                *[str(self.path(a)) if a.startswith("/etc/ragmon/") else a for a in line[1:]]]

    def start(self) -> Pod:
        cwd = self.path(self.container["workingDir"]) if "workingDir" in self.container else self.root
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command(), env=self.env, cwd=cwd, stdout=log,
                                            stderr=subprocess.STDOUT)
        return self

    def run(self, timeout: float = 60) -> int:
        return self.start().process.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, predicate, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.process.poll() is None, f"{self.name} exited while waiting for {what}:\n{self.log()}"
            assert time.monotonic() < deadline, f"{self.name}: no {what} within {timeout} s:\n{self.log()}"
            time.sleep(0.2)

    def ready(self, port: int) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> int:
        """SIGTERM, as the kubelet sends first; the status (uvicorn re-raises the signal once shut
        down, so a clean stop reads as -SIGTERM)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(45)


@pytest.mark.parametrize("release", RELEASES)
def test_every_rendered_container_starts_with_the_environment_a_kubelet_gives_it(release, kafka, postgres, tmp_path):
    port, read_port = free_port(), free_port()
    topics = {key: new_topic(kafka, 1, key) for key in ("traces", "catalog", "dlq")}
    docs = render(release, "--set", f"service.port={port}", "--set", f"service.readPort={read_port}",
                  "--set-json", f'config.kafka.bootstrap_servers=["{kafka.bootstrap_servers}"]',
                  "--set", f"config.kafka.traces_topic={topics['traces']}",
                  "--set", f"config.kafka.catalog_topic={topics['catalog']}",
                  "--set", f"config.kafka.dead_letter_topic={topics['dlq']}")
    services = with_cluster_ips(d for d in docs if d["kind"] == "Service")
    collector_service = release if "ragmon" in release else f"{release}-ragmon"  # the chart's full name
    assert collector_service in {s["metadata"]["name"] for s in services}
    secrets = {("ragmon-db", "url"): postgres.create_database(f"r{uuid.uuid4().hex[:8]}"),
               ("ragmon-keys", "caller-key"): "a-caller-key-of-thirty-two-chars",
               ("ragmon-auth", "token"): "an-ingest-token"}
    config_maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Deployment", "Job")}
    for manifest in workloads.values():
        assert manifest["spec"]["template"]["spec"]["enableServiceLinks"] is False, manifest["metadata"]["name"]
    pods = {name: Pod(manifest, services, secrets, config_maps, tmp_path) for name, manifest in workloads.items()}
    [migrate] = [p for p in pods.values() if p.name.endswith("-migrate")]
    [collector] = [p for p in pods.values() if p.name.endswith("-collector")]
    [scheduler] = [p for p in pods.values() if p.name.endswith("-scheduler")]
    links = collector_service.replace("-", "_").upper()  # RAGMON, RAGMON_PROD, RAG_RAGMON
    assert {f"{links}_SERVICE_HOST", f"{links}_PORT", f"{links}_SCHEDULER_PORT"} <= set(collector.env)

    # a first install whose hook is slow: the collector waits for the schema, saying why
    collector.start()
    collector.wait_for(lambda: "waiting for the database" in collector.log(), "log line about the schema")
    assert migrate.run() == 0, migrate.log()
    collector.wait_for(lambda: collector.ready(port), "readiness after the migration")
    # ingest clients name the Service, Prometheus and the probes the pod's IP: none is refused (421)
    sent = httpx.post(f"http://127.0.0.1:{port}/v1/events", json=[], headers={
        "host": f"{collector_service}.monitoring.svc:{port}", "authorization": "Bearer an-ingest-token"})
    assert sent.status_code == 200, sent.text
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"host": f"10.244.3.17:{port}"})
    assert scraped.status_code == 200 and "ragmon_build_info" in scraped.text
    assert httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"host": f"rebind.test:{port}"}).status_code == 421
    # the read side answers on its own port alone
    assert httpx.get(f"http://127.0.0.1:{read_port}/api/v1/findings").status_code == 200
    assert httpx.get(f"http://127.0.0.1:{port}/api/v1/findings").status_code == 404
    assert collector.stop() == -signal.SIGTERM and "Application shutdown complete" in collector.log()
    scheduler.start().wait_for(lambda: scheduler.ready(port), "readiness")
    assert scheduler.stop() == -signal.SIGTERM and "Application shutdown complete" in scheduler.log()
    for pod in pods.values():
        log = without_kafka_close_race(pod.log())
        assert "unknown key" not in log and "Traceback" not in log, pod.log()
