"""Start real services for the integration tests: Apache Kafka (KRaft), PostgreSQL, Prometheus,
Alertmanager, Label Studio. Each runs on 127.0.0.1, on a free port, in a temporary directory, and is stopped
(process group killed) when its context ends. ``tests/services/install.sh`` installs them.

A service that does not come up raises :class:`ServiceError` carrying the tail of its log, so a
failed start explains itself in the test output.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CACHE = Path(os.environ.get("SERVICES_CACHE_DIR", Path.home() / ".cache" / "ragmon-services"))


HELM_VERSION = "v3.22.0"
# presidio-evaluator's sentence templates, read from its wheel (the package itself, with spaCy,
# transformers and scikit-learn, is far more than a file of templates needs)
PRESIDIO_EVALUATOR_VERSION = "0.3.2"


def presidio_templates() -> Path:
    """templates.txt of presidio-evaluator, taken out of its wheel by install.sh."""
    return CACHE / f"presidio-evaluator-{PRESIDIO_EVALUATOR_VERSION}" / "templates.txt"


def clients_dir() -> Path:
    """The virtual environment of the RAG frameworks in tests/clients/, named by a digest of its
    requirements so that a changed pin installs afresh (install.sh creates it)."""
    clients = HERE.parent / "clients"
    digest = hashlib.sha256(b"".join((clients / name).read_bytes() for name in ("requirements.txt",
                                                                                   "constraints.txt")))
    return CACHE / f"clients-{digest.hexdigest()[:12]}"


def clients_python() -> Path:
    python = clients_dir() / "bin" / "python"
    if not (clients_dir() / ".complete").exists():
        raise FileNotFoundError(f"the frameworks of tests/clients are missing at {clients_dir()}: "
                                "run tests/services/install.sh")
    return python


def helm_binary() -> Path:
    """helm, built from the Go module proxy by install.sh."""
    path = CACHE / f"helm-{HELM_VERSION}" / "helm"
    if not path.exists():
        raise FileNotFoundError(f"helm {HELM_VERSION} is missing at {path}: run tests/services/install.sh")
    return path


class ServiceError(RuntimeError):
    """A service failed to start; the message holds the end of its log."""


# Ports for the services and servers tests start, below the kernel's ephemeral range (32768 and
# up on Linux), so no outgoing connection or `bind(0)` is handed one of them meanwhile, and split
# between pytest-xdist workers (PYTEST_XDIST_WORKER gw0, gw1, ...), so two workers never choose
# the same one.
PORTS = range(20_000, 32_000)
_handed: set[int] = set()


def free_port() -> int:
    """A loopback port nobody listens on, not handed out before by this process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    share = len(PORTS) // max(workers, 1)
    mine = range(PORTS.start + index * share, PORTS.start + (index + 1) * share)
    for _ in range(1000):
        port = random.choice(mine)
        if port in _handed:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise ServiceError(f"no free port in {mine.start}-{mine.stop - 1}")


def http_get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback only)
        return response.read()


class Service(ABC):
    """A process started in its own process group with its output in ``log_path``."""

    name = "service"
    start_timeout = 60.0

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"ragmon-{self.name}-"))
        self.log_path = self.dir / f"{self.name}.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @abstractmethod
    def start(self) -> None:
        """Start the process and wait until it serves; raise :class:`ServiceError` if it does not."""

    def _spawn(self, argv: Sequence[str], env: dict[str, str] | None = None, user: str | None = None) -> None:
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.dir, env={**os.environ, **(env or {})}, start_new_session=True,
            )

    def _wait_until(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                self._fail(f"exited with status {self.process.returncode} before {what}")
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.25)
        self._fail(f"not {what} after {self.start_timeout:.0f} s")

    def _fail(self, why: str) -> None:
        raise ServiceError(f"{self.name} {why}; last lines of {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 20.0) -> None:
        """Stop the process and remove its directory."""
        self.halt(grace)
        shutil.rmtree(self.dir, ignore_errors=True)

    def halt(self, grace: float = 20.0) -> None:
        """Stop the process (SIGTERM, then SIGKILL after ``grace``), keeping its data."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def _run(argv: Sequence[str], what: str, cwd: Path | None = None) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise ServiceError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


class Kafka(Service):
    """A single-node Apache Kafka 4 broker in KRaft mode (broker and controller in one process)."""

    name = "kafka"
    version_file = HERE / "kafka-pom.xml"

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        self._admin = None  # the admin client admin_call keeps

    @staticmethod
    def jars() -> Path:
        """The broker's jars, fetched by install.sh for the version pinned in kafka-pom.xml."""
        pom = Kafka.version_file.read_text()
        version = pom.split("<kafka.version>")[1].split("</kafka.version>")[0]
        path = CACHE / f"kafka-{version}"
        if not (path / ".complete").exists():
            raise ServiceError(f"Kafka {version} jars are missing in {path}: run tests/services/install.sh")
        return path

    def start(self) -> None:
        jars = self.jars()
        properties = self.dir / "server.properties"
        properties.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={self.dir / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true",
            "",
        ]))
        log4j = self.dir / "log4j2.properties"
        log4j.write_text("\n".join([
            "appender.out.type=Console", "appender.out.name=out",
            "appender.out.layout.type=PatternLayout", "appender.out.layout.pattern=[%d] %p %m (%c)%n",
            "rootLogger.level=WARN", "rootLogger.appenderRef.out.ref=out", "",
        ]))
        classpath = f"{jars}/*"
        # base64url may start with "-": passed as --cluster-id=ID it cannot be taken for an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        java = shutil.which("java") or "java"
        _run([java, "-cp", classpath, f"-Dlog4j2.configurationFile={log4j}", "kafka.tools.StorageTool",
              "format", "--standalone", f"--cluster-id={cluster_id}", "-c", str(properties)], "kafka storage format")
        self._argv = [java, "-Xms256m", "-Xmx768m", "-cp", classpath, f"-Dlog4j2.configurationFile={log4j}",
                      "kafka.Kafka", str(properties)]
        self.resume()

    def resume(self) -> None:
        """Start the broker (again, after :meth:`halt`) on the same ports and data."""
        self._spawn(self._argv)
        self._wait_until(self._ready, "ready")

    def admin_call(self, call: Callable[[Any], Any]) -> Any:
        """``call(admin)`` on one admin client kept for this broker. Tests poll committed offsets
        every quarter second while they wait; a client made for each poll (bootstrap, version probe,
        metadata) cost 8 ms of the test process's CPU against 1 ms for asking the kept one. A client
        whose call failed is closed and dropped, so that a retry connects afresh (the broker may
        have been restarted)."""
        from kafka import KafkaAdminClient

        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        admin = self._admin
        try:
            return call(admin)
        except BaseException:
            self._close_admin()
            raise

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()

    def halt(self, grace: float = 20.0) -> None:
        self._close_admin()  # not left reconnecting to a broker that is gone
        super().halt(grace)

    def _ready(self) -> bool:
        """The broker lists its topics and its group coordinator answers: asking a group's offsets
        creates and loads the offsets topic (retriable CoordinatorNotAvailable and
        CoordinatorLoadInProgress meanwhile), which tests would otherwise run into at their first
        commit or offset listing."""
        from kafka import KafkaAdminClient

        from ragmon.collectors.kafka_calls import kafka_call

        def answers() -> bool:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=3000)
            try:
                admin.list_topics()
                admin.list_group_offsets("ragmon-harness-ready")
                return True
            finally:
                admin.close()

        return kafka_call(answers, "asking the Kafka broker for its topics and a group's offsets",
                          deadline=10.0)  # then _wait_until looks whether the process still runs


class Postgres(Service):
    """A private PostgreSQL cluster (Debian's binaries) with trust auth on 127.0.0.1."""

    name = "postgres"
    start_timeout = 30.0

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @staticmethod
    def bindir() -> Path:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
        if not found:
            raise ServiceError("PostgreSQL server binaries are missing: run tests/services/install.sh")
        return Path(found[-1]).parent

    def start(self) -> None:
        bindir = self.bindir()
        data = self.dir / "data"
        # PostgreSQL refuses to run as root; as root, run it as the packaged `postgres` user.
        user = None
        if os.geteuid() == 0:
            user = "postgres"
            entry = pwd.getpwnam(user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            self.log_path.touch()
            os.chown(self.log_path, entry.pw_uid, entry.pw_gid)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-sync"]
        if user:
            initdb = ["runuser", "-u", user, "--", *initdb]
        _run(initdb, "initdb", cwd=self.dir)
        self._argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                      "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                      "-c", "fsync=off", "-c", "max_connections=100"]
        self._user = user
        self.resume()

    def resume(self) -> None:
        """Start the server (again, after :meth:`halt`) on the same port and data."""
        self._spawn(self._argv, user=self._user)
        self._wait_until(self._ready, "accepting connections")

    def _ready(self) -> bool:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             connect_timeout=2) as connection:
            connection.execute("select 1")
        return True

    def create_database(self, name: str) -> str:
        """A fresh database on this cluster; returns its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as connection:
            connection.execute(f'create database "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"


class Prometheus(Service):
    """Prometheus with a generated config; scrape targets and rule files can be changed live."""

    name = "prometheus"
    start_timeout = 30.0

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = self.dir / "prometheus.yml"

    def write_config(self, targets: Sequence[str] = (), rule_files: Sequence[str] = (),
                     alertmanager: str | None = None, interval: str = "1s") -> Path:
        """Write the config (self-scrape plus ``targets`` as job ``ragmon``)."""
        config: dict = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{self.port}"]}]},
            ],
        }
        if targets:
            config["scrape_configs"].append({"job_name": "ragmon", "static_configs": [{"targets": list(targets)}]})
        if rule_files:
            config["rule_files"] = list(rule_files)
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        # JSON is YAML: no YAML library needed here
        self.config_path.write_text(json.dumps(config, indent=2))
        return self.config_path

    def start(self) -> None:
        if not self.config_path.exists():
            self.write_config()
        self.check_config()
        self._spawn(["prometheus", f"--config.file={self.config_path}", f"--storage.tsdb.path={self.dir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
                     "--enable-feature=exemplar-storage", "--log.level=warn"])
        self._wait_until(lambda: http_get(f"{self.url}/-/ready") is not None, "ready")

    def check_config(self) -> str:
        return _run(["promtool", "check", "config", str(self.config_path)], "promtool check config")

    def reload(self) -> None:
        self.check_config()
        request = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        urllib.request.urlopen(request, timeout=5).close()  # noqa: S310 (loopback only)

    def query(self, promql: str) -> list[dict]:
        """Instant query; returns the result vector."""
        from urllib.parse import urlencode

        body = json.loads(http_get(f"{self.url}/api/v1/query?{urlencode({'query': promql})}"))
        if body.get("status") != "success":
            raise ServiceError(f"query {promql!r} failed: {body}")
        return body["data"]["result"]

    def query_exemplars(self, promql: str, start: float, end: float) -> list[dict]:
        """The exemplars stored for the series ``promql`` selects between ``start`` and ``end``."""
        from urllib.parse import urlencode

        body = json.loads(http_get(f"{self.url}/api/v1/query_exemplars?"
                                   f"{urlencode({'query': promql, 'start': start, 'end': end})}"))
        if body.get("status") != "success":
            raise ServiceError(f"exemplar query {promql!r} failed: {body}")
        return body["data"]


class Alertmanager(Service):
    """Alertmanager, clustering off, routing everything to an optional webhook URL."""

    name = "alertmanager"
    start_timeout = 30.0

    def __init__(self, webhook_url: str | None = None) -> None:
        super().__init__()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.webhook_url = webhook_url

    def start(self) -> None:
        receiver: dict = {"name": "default"}
        if self.webhook_url:
            receiver["webhook_configs"] = [{"url": self.webhook_url, "send_resolved": True}]
        config = {"route": {"receiver": "default", "group_wait": "1s", "group_interval": "1s",
                            "repeat_interval": "1h"},
                  "receivers": [receiver]}
        path = self.dir / "alertmanager.yml"
        path.write_text(json.dumps(config, indent=2))
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "alertmanager"
        self._spawn([binary, f"--config.file={path}", f"--storage.path={self.dir / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
                     "--log.level=warn"])
        self._wait_until(lambda: json.loads(http_get(f"{self.url}/api/v2/status")) is not None, "ready")

    def status(self) -> dict:
        return json.loads(http_get(f"{self.url}/api/v2/status"))

    def alerts(self) -> list[dict]:
        return json.loads(http_get(f"{self.url}/api/v2/alerts"))


class LabelStudio(Service):
    """Label Studio from its own virtual environment (install.sh), SQLite in a temporary data dir,
    one administrator. Like a fresh organization of a current release, legacy API tokens are off:
    :meth:`personal_access_token` makes a personal access token the way a user does in the UI
    (logged in, then ``POST /api/token/``); :meth:`set_legacy_tokens` is the administrator's switch."""

    name = "label-studio"
    start_timeout = 240.0  # without the database install.sh migrated, a start runs the migrations
    requirements = HERE / "label-studio-requirements.txt"
    database = "label_studio.sqlite3"  # its SQLite file, in the data dir
    email = "labeler@ragmon.test"
    password = "labels-" + uuid.uuid4().hex[:12]

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.legacy_token = uuid.uuid4().hex
        self._personal_token: str | None = None

    @classmethod
    def venv(cls) -> Path:
        version = next(line.split("==")[1].strip() for line in cls.requirements.read_text().splitlines()
                       if line.startswith("label-studio=="))
        path = CACHE / f"label-studio-{version}"
        if not (path / ".complete").exists():
            raise ServiceError(f"Label Studio {version} is missing in {path}: run tests/services/install.sh")
        return path

    def start(self) -> None:
        binary = self.venv() / "bin" / "label-studio"
        data = self.dir / "data"
        migrated = self.venv() / "migrated" / "data" / self.database
        if migrated.exists():  # a copy of the database install.sh migrated: a minute less
            data.mkdir(parents=True, exist_ok=True)
            shutil.copy2(migrated, data / self.database)
        self._spawn([str(binary), "start", "--no-browser", "--data-dir", str(data), "--internal-host", "127.0.0.1",
                     "--port", str(self.port), "--username", self.email, "--password", self.password,
                     "--user-token", self.legacy_token, "--log-level", "WARNING"],
                    env={"HOME": str(self.dir), "LABEL_STUDIO_BASE_DATA_DIR": str(data),
                         "COLLECT_ANALYTICS": "false", "LATEST_VERSION_CHECK": "false"})
        self._wait_until(lambda: json.loads(http_get(f"{self.url}/health")).get("status") == "UP", "serving")

    @contextlib.contextmanager
    def session(self):
        """An httpx client logged in as the administrator (session cookie and CSRF header)."""
        import httpx

        with httpx.Client(base_url=self.url, timeout=30, follow_redirects=False) as client:
            self._log_in(client)
            yield client

    def _log_in(self, client) -> None:
        page = client.get("/user/login/")
        marker = 'name="csrfmiddlewaretoken" value="'
        form_token = page.text.split(marker, 1)[1].split('"', 1)[0]
        done = client.post("/user/login/", data={"csrfmiddlewaretoken": form_token, "email": self.email,
                                                 "password": self.password},
                           headers={"Referer": f"{self.url}/user/login/"})
        if done.status_code != 302:
            raise ServiceError(f"label studio login failed: HTTP {done.status_code}")
        client.headers.update({"X-CSRFToken": client.cookies["csrftoken"], "Referer": f"{self.url}/"})

    def personal_access_token(self) -> str:
        """The administrator's personal access token (made once: Label Studio allows one per user)."""
        if self._personal_token is None:
            with self.session() as client:
                response = client.post("/api/token/")
                response.raise_for_status()
                self._personal_token = response.json()["token"]
        return self._personal_token

    def api(self):
        """An httpx client for the REST API as the administrator (a labeler posting annotations)."""
        import httpx

        refresh = httpx.post(f"{self.url}/api/token/refresh/", json={"refresh": self.personal_access_token()})
        refresh.raise_for_status()
        return httpx.Client(base_url=self.url, timeout=30,
                            headers={"Authorization": f"Bearer {refresh.json()['access']}"})

    def set_legacy_tokens(self, enabled: bool) -> None:
        with self.session() as client:
            client.post("/api/jwt/settings", json={"api_tokens_enabled": True,
                                                   "legacy_api_tokens_enabled": enabled}).raise_for_status()
