"""Configuration: one YAML file plus ``RAGMON_`` environment overrides.

Precedence, highest first: environment (``RAGMON_SECTION__KEY``, merged into the file's data by
``monitor/config/environment.py``), the YAML file, defaults. Every section forbids unknown keys, so
a typo is an error that names the key instead of a setting silently left at its default; no
number setting takes ``inf`` or ``nan`` (``ConfigSection``).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import yaml
from pydantic import (
    BaseModel,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from ragmon.monitor.config.alerting import AlertsConfig
from ragmon.monitor.config.catalog_sources import SOURCE_MODELS
from ragmon.monitor.config.environment import ENV_CONFIG_FILE, OverrideError, apply_environment
from ragmon.monitor.config.pipeline import (
    CatalogConfig,
    DedupeConfig,
    EventsConfig,
    FindingsConfig,
    Limits,
    SignalsConfig,
)
from ragmon.monitor.config.scheduling import ProbesConfig, SchedulerConfig
from ragmon.monitor.config.secret_refs import SecretRef
from ragmon.monitor.config.section import ConfigSection, HttpUrlText
from ragmon.monitor.config.telemetry import TelemetryConfig
from ragmon.monitor.labeling.redact import RedactionConfig
from ragmon.monitor.labeling.sampling import SamplingConfig

MASK = "****"

# a DNS name as a Host header carries it (letters, digits, `-`, `_`, dots), for http.allowed_hosts
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?", re.ASCII)


class ConfigError(Exception):
    """The configuration is unusable; the message names the key and what is wrong."""


class DeadLetterConfig(ConfigSection):
    """Where rejected records go in embedded mode (a JSONL file)."""

    path: Path = Field(Path("ragmon-data/dead-letters.jsonl"), description="JSONL file of rejected records.")
    max_raw_bytes: PositiveInt = Field(
        65536, description="Raw bytes kept (encrypted, with `keep_raw`) per rejected record; longer records are "
        "truncated and flagged."
    )
    max_file_bytes: PositiveInt = Field(
        64 * 1024 * 1024, description="Size at which the file is rotated (`path` becomes `path.1`, ...).")
    keep_files: NonNegativeInt = Field(
        4, description="Rotated files kept; the oldest beyond them is deleted and its letters counted in "
        "`ragmon_dead_letters_dropped_total`.")
    max_text_bytes: PositiveInt = Field(
        4096, description="Bytes of a rejected record its letter's redacted text is made from.")
    texts_per_second: PositiveFloat = Field(
        10.0, description="Letters per second that get a redacted text (after a burst of ten seconds' worth); "
        "beyond it a letter keeps its hash and says `text_omitted`: redaction stays bounded under a flood.")
    keep_raw: bool = Field(
        False, description="Keep each rejected record's raw bytes, encrypted with `encryption_key` (AES-GCM), "
        "in the file and on the dead-letter topic. Off: a letter keeps a keyed hash and the redacted text.")
    encryption_key: SecretStr = Field(
        SecretStr(""), description="Base64 of a 16, 24 or 32-byte AES key; required with `keep_raw`. New letters "
        "are encrypted with it.")
    previous_encryption_keys: list[SecretStr] = Field(
        default_factory=list, description="Keys `encryption_key` had before (base64, as it): letters encrypted "
        "under them are still read (list, replay, erase); none is used to encrypt. To rotate the key: move the "
        "old one here, set the new one, run `ragmon keys rotate` (which seals the letters of the files again under "
        "the new one), then drop the old one (docs/deployment.md, \"Rotating secrets\").")

    @model_validator(mode="after")
    def _key_for_raw(self) -> DeadLetterConfig:
        if self.keep_raw:
            self.raw_keys()
        return self

    def raw_key(self) -> bytes | None:
        """The AES key raw bytes are encrypted with, or None when they are not kept."""
        if not self.keep_raw:
            return None
        return _aes_key(self.encryption_key, "encryption_key: keep_raw needs")

    def raw_keys(self) -> list[bytes] | None:
        """Every AES key raw bytes may be decrypted with, the newest first, or None when they are
        not kept."""
        newest = self.raw_key()
        if newest is None:
            return None
        return [newest, *(_aes_key(key, f"previous_encryption_keys[{i}]: needs")
                          for i, key in enumerate(self.previous_encryption_keys))]


def _aes_key(secret: SecretStr, what: str) -> bytes:
    try:
        key = base64.b64decode(secret.get_secret_value(), validate=True)
    except ValueError:
        key = b""
    if len(key) not in (16, 24, 32):
        raise ValueError(f"{what} the base64 of a 16, 24 or 32-byte key (e.g. `openssl rand -base64 32`)")
    return key


class DatabaseConfig(ConfigSection):
    """The SQL store: the catalog, samples and weekly-quota claims, findings and low-score baselines
    (weekly batches and the regression set are files; pushed-alert state is in memory)."""

    url: str = Field(
        "sqlite:///ragmon-data/ragmon.db",
        description="SQLAlchemy URL: sqlite:///FILE or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB.",
    )
    schema_wait_seconds: NonNegativeInt = Field(
        90,
        description="How long `serve` and `scheduler` wait at start for a reachable PostgreSQL at the code's "
        "schema (`ragmon db upgrade`, the chart's migration hook) before exiting; 0: do not wait.",
    )


class LabelsConfig(ConfigSection):
    """Caps on metric label values (docs/metrics.md): an allowlist, else the first N seen, then `other`."""

    tenants: list[str] = Field(default_factory=list, description="Tenants always given their own label value.")
    indexes: list[str] = Field(default_factory=list, description="Indexes always given their own label value.")
    max_tenants: PositiveInt = Field(50, description="Tenant label values besides the allowlist.")
    max_indexes: PositiveInt = Field(50, description="Index label values besides the allowlist.")
    max_retrievers: PositiveInt = Field(10, description="Retriever label values.")
    scopes: list[str] = Field(default_factory=list, description="OTLP instrumentation scopes always given their own "
                              "label value (as shown: docs/events.md, \"Traces ragmon cannot read\").")
    max_scopes: PositiveInt = Field(20, description="OTLP instrumentation scope label values besides the allowlist.")


class HttpConfig(ConfigSection):
    """The HTTP port of `ragmon serve`: ingest, metrics, health, and the read side (status page, read API),
    which may have a port of its own."""

    host: str = Field("127.0.0.1", description="Address to listen on (0.0.0.0 in a container; a non-loopback "
                      "address needs `token`, or `allow_unauthenticated`).")
    port: int = Field(4318, ge=1, le=65535, description="Port to listen on.")
    read_port: int | None = Field(
        None, ge=1, le=65535, description="A second port, on the same address, for the read side: with it, the "
        "status page, `/traces/…` and `/api/v1/…` are served there only, and ingest and `/metrics` on `port` only "
        "(health on both), so a network policy can admit readers and senders apart. Unset: everything on `port`.")
    token: SecretStr | None = Field(None, description="Bearer token required on every ingest endpoint, if set. "
                                    "It never reads: see `read_token`.")
    token_next: SecretStr | None = Field(
        None, description="The next value of `token`, accepted beside it while clients move to it: set "
        "this, roll the clients, promote it, remove it (docs/deployment.md, \"Rotating secrets\").")
    allow_unauthenticated: bool = Field(
        False, description="Serve a non-loopback address without `token` (a WARNING at start and "
        "`ragmon_http_unauthenticated 1`); otherwise `serve` and `scheduler` refuse to start. With neither "
        "`read_token` nor `read_tokens` set, reads are then open too, and the WARNING says so.")
    catalog_token: SecretStr | None = Field(
        None, description="Bearer token that may write the catalog (document and index events) over HTTP. "
        "Without it, catalog events over HTTP are refused (`not_permitted`) whenever `host` is not loopback; "
        "the Kafka catalog topic is trusted by its own ACLs.")
    catalog_token_next: SecretStr | None = Field(
        None, description="The next value of `catalog_token`, accepted beside it while clients move to it: set "
        "this, roll the clients, promote it, remove it (docs/deployment.md, \"Rotating secrets\").")
    metrics_token: SecretStr | None = Field(None, description="Bearer token required on /metrics, if set.")
    metrics_token_next: SecretStr | None = Field(
        None, description="The next value of `metrics_token`, accepted beside it while clients move to it: set "
        "this, roll the clients, promote it, remove it (docs/deployment.md, \"Rotating secrets\").")
    read_token: SecretStr | None = Field(
        None, description="Bearer token of the read side: the status page, `/traces/…`, `/api/v1/findings` and "
        "`/api/v1/traces/…`, every tenant. Neither `token` nor `catalog_token` reads. With no read credential "
        "(this or `read_tokens`) reads are open on a loopback address and closed (403) on any other.")
    read_token_next: SecretStr | None = Field(
        None, description="The next value of `read_token`, accepted beside it while clients move to it: set "
        "this, roll the clients, promote it, remove it (docs/deployment.md, \"Rotating secrets\").")
    read_tokens: dict[SecretRef, list[str]] = Field(
        default_factory=dict, description="Read tokens scoped to tenants: `{reference: [tenant, …]}`, the "
        "reference `env:VARIABLE` or `file:/path` (read at start, on SIGHUP and when the file changes; the token "
        "itself stays out of this file). Such a token reads `/api/v1/findings` and `/api/v1/traces/…` of its "
        "tenants only (tenant names as sent, or as shown); the status page and trace pages show every tenant and "
        "need `read_token`. To rotate one, add a second reference with the same tenants, roll the clients, then "
        "remove the old reference.")
    reload_check_seconds: float = Field(
        5.0, ge=0, description="How often `ragmon serve` looks whether the configuration file (`RAGMON_CONFIG`) or a "
        "`file:` reference of `read_tokens` changed (its content, or where its symlinks lead: a mounted Kubernetes "
        "Secret), and reloads the tokens as on SIGHUP when one did. 0: on SIGHUP only.")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host names requests may be addressed to (the `Host` header, any port), "
        "besides `localhost`, any IP address, and the name `host` gives; a request naming another host gets 421 "
        "(a page on a rebound DNS name cannot read the port). E.g. the Service's DNS names.")
    allowed_origins: list[str] = Field(
        default_factory=list, description="Browser origins (`https://app.example`) whose requests are accepted; "
        "any other request carrying an `Origin` header is refused (403).")
    tls_cert_file: Path | None = Field(None, description="PEM certificate chain: serve HTTPS (with `tls_key_file`).")
    tls_key_file: Path | None = Field(None, description="PEM private key of `tls_cert_file`.")
    tls_client_ca_file: Path | None = Field(
        None, description="PEM CA bundle: require a client certificate signed by it on every request (mutual TLS).")
    max_body_bytes: PositiveInt = Field(16 * 1024 * 1024, description="Largest request body accepted.")
    max_records_per_request: PositiveInt = Field(
        10_000, description="Most events in one ingest request; beyond it, 413 naming the count.")
    max_pending_requests: PositiveInt = Field(
        64, description="Ingest requests being processed at once; beyond it, 503 with Retry-After."
    )
    body_timeout_seconds: PositiveFloat = Field(
        30.0, description="Time a client has to send its request body; a slower one gets 408.")
    max_inflight_bytes: PositiveInt = Field(
        256 * 1024 * 1024, description="Request bodies held at once by the process, read or decompressed; "
        "beyond it, 503 with Retry-After.")
    saturation_seconds: PositiveFloat = Field(
        10.0, description="/readyz answers 503 once every ingest slot has been busy this long.")

    @model_validator(mode="after")
    def _tls_is_whole(self) -> HttpConfig:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together: set both or neither")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError("tls_client_ca_file needs tls_cert_file and tls_key_file: mutual TLS is TLS first")
        return self

    @model_validator(mode="after")
    def _reading_apart(self) -> HttpConfig:
        if self.read_port is not None and self.read_port == self.port:
            raise ValueError(f"read_port {self.read_port} is the port itself: give the read side a port of its own, "
                             "or leave read_port unset")
        for reading in ("read_token", "read_token_next"):
            reader = getattr(self, reading).get_secret_value() if getattr(self, reading) else None
            for name in ("token", "catalog_token", "metrics_token"):
                for other in (getattr(self, name), getattr(self, f"{name}_next")):
                    if reader and other is not None and other.get_secret_value() == reader:
                        raise ValueError(f"{reading} is the same as {name} (or its next value): whoever holds that "
                                         "token (every sender, or Prometheus) would read every tenant's findings; "
                                         "give readers a token of their own")
        for name in ("token", "catalog_token", "metrics_token", "read_token"):
            if getattr(self, f"{name}_next") is not None and getattr(self, name) is None:
                raise ValueError(f"{name}_next is set without {name}: the next value is accepted beside the current "
                                 f"one while clients move; to guard an open endpoint, set {name}")
        for ref, tenants in self.read_tokens.items():
            if not tenants or not all(tenant.strip() for tenant in tenants):
                raise ValueError(f"read_tokens: {ref}: list the tenants (non-empty names) this token reads")
        return self

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if _HOST_NAME.fullmatch(host) is None:
                raise ValueError(f"{host!r} is not a host name (a DNS name, without scheme, port, path or wildcard; "
                                 "IP addresses need no listing)")
        return hosts


CALLER_KEY_KINDS = ("user", "session", "tenant", "groups", "index")


class OtlpConfig(ConfigSection):
    """The OTLP/HTTP trace receiver (`POST /v1/traces` on the HTTP port)."""

    enabled: bool = Field(True, description="Accept OTLP traces.")
    assembly_wait_seconds: PositiveFloat = Field(
        10.0, description="A trace is complete once no span of it arrived for this long. Keep it above the senders' "
        "export delay: the OpenTelemetry SDK's batch span processor exports every 5 s (`OTEL_BSP_SCHEDULE_DELAY`), "
        "so a trace that straddles two exports arrives in two requests about 5 s apart."
    )
    root_grace_seconds: PositiveFloat = Field(
        1.0, description="A trace whose root span (no parent; it ends, and is exported, last) arrived is complete "
        "once no span of it arrived for this long. Spans another service exports later start a second, partial "
        "trace: set it to `assembly_wait_seconds` (its cap) to always wait that long. Traces held at once are "
        "about the traffic rate times this, within `max_pending_traces`.",
    )
    max_pending_traces: PositiveInt = Field(
        10_000, description="Traces being assembled at most; beyond it, 503 with Retry-After."
    )
    max_spans_per_trace: PositiveInt = Field(1000, description="Spans kept per trace; more are rejected.")
    max_pending_bytes: PositiveInt = Field(
        32 * 1024 * 1024, description="Request bytes of the spans being assembled at most (each span weighs "
        "its request's size over its span count); beyond it, 503 with Retry-After.")
    forward_to_kafka: bool = Field(
        False, description="Send assembled traces to the Kafka traces topic (keyed by caller) instead of "
        "processing them here, so all state sits on one keyed path."
    )
    passage_id_keys: list[str] = Field(
        default_factory=lambda: ["id", "chunk_id", "doc_id+span", "doc_id+start_char_idx", "source+page",
                                 "source+start_index"],
        description="How a passage reported without an id is named: the first rule whose document metadata keys "
        "are all present, a rule being one key or several joined by `+` (values joined by `#`); else `sha:` and a "
        "hash of its content.",
    )
    doc_id_keys: list[str] = Field(
        default_factory=lambda: ["doc_id", "document_id", "ref_doc_id", "source", "file_path"],
        description="Document metadata keys naming a passage's document, first present wins.",
    )
    unread_digests_per_minute: PositiveFloat = Field(
        10.0, description="Digests kept per minute, after a burst of a minute's worth, of traces ragmon cannot read "
        "or reads without a caller or a context (`ragmon otlp unread`, `GET /api/v1/unread`); a trace shaped like one "
        "kept in the last hour is only counted, as are those over this rate "
        "(`ragmon_otlp_unread_digests_total`).")
    unread_retention_days: PositiveFloat = Field(
        7.0, description="Digests of unread traces older than this are deleted by the scheduler's `retention` job.")

    caller_keys: dict[str, list[str]] = Field(
        default_factory=lambda: {"user": ["user_id", "user.id", "userId"],
                                 "session": ["session_id", "session.id", "sessionId", "thread_id"],
                                 "tenant": ["tenant", "tenant_id", "customer_id"], "groups": ["groups"],
                                 "index": ["index"]},
        description="The keys naming the caller (`user`), the conversation (`session`), the tenant, the caller's "
        "groups and the index in an instrumentation's own key-value properties (OpenLLMetry's association "
        "properties, LangChain run metadata, ...), first present wins; a kind left out keeps its default keys.",
    )

    @field_validator("caller_keys")
    @classmethod
    def _caller_kinds(cls, keys: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = sorted(keys.keys() - set(CALLER_KEY_KINDS))
        if unknown:
            raise ValueError(f"unknown kind {', '.join(unknown)} (one of {', '.join(CALLER_KEY_KINDS)})")
        if any(not key for names in keys.values() for key in names):
            raise ValueError("an empty key")
        return keys

    @field_validator("passage_id_keys", "doc_id_keys")
    @classmethod
    def _keys_named(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            if not rule or not all(part.strip() for part in rule.split("+")):
                raise ValueError(f"empty key in {rule!r} (a rule is `key` or `key+key`)")
        return rules


class KafkaConfig(ConfigSection):
    """Kafka (scaled mode). Empty ``bootstrap_servers``: no Kafka, HTTP only."""

    bootstrap_servers: list[str] = Field(default_factory=list, description="Brokers, e.g. [kafka-0:9092].")
    group_id: str = Field("ragmon", description="Consumer group of the ragmon replicas on the traces topic.")
    traces_topic: str = Field("rag.traces", description="Trace and feedback events, keyed by conversation or caller.")
    catalog_topic: str = Field(
        "rag.catalog", description="Document and index events (compacted; read whole by every replica)."
    )
    samples_topic: str = Field("ragmon.samples", description="Where each new sample is published.")
    dead_letter_topic: str = Field("ragmon.dlq", description="Rejected records, with reason and origin in headers.")
    max_batch: PositiveInt = Field(500, description="Records per processed batch (and per offset commit).")
    max_dead_letter_ratio: float = Field(
        0.5, ge=0, le=1,
        description="Dead-lettered share of the last `dead_letter_window` records above which consumption stops "
        "(a broken producer must be loud, not silently dead-lettered). 1 disables the limit.",
    )
    dead_letter_window: PositiveInt = Field(1000, description="Records over which the dead-letter ratio is judged.")
    lag_interval_seconds: PositiveFloat = Field(10.0, description="How often the consumer lag gauge is refreshed.")
    session_timeout_ms: int = Field(
        10_000, ge=1000, description="A replica that sends no heartbeat for this long is dropped from the group and "
        "its partitions handed over: it bounds how long a killed replica's partitions stand still (the broker "
        "allows group.min.session.timeout.ms, 6000 by default, and more).")
    heartbeat_interval_ms: int = Field(
        3_000, ge=100, description="How often a replica tells the group it is alive; at most a third of "
        "`session_timeout_ms`.")
    max_poll_interval_ms: int = Field(
        60_000, ge=30_000, description="A replica that does not poll for this long leaves the group (a stuck "
        "process gives its partitions up). At least 30 s: a batch's Kafka calls on the consumer's thread (producer "
        "sends and flushes, the commit) each wait at most 10 s before the batch is retried.")
    warmup_records: NonNegativeInt = Field(
        5_000, description="When a replica is assigned a partition whose latest records another replica processed, "
        "it first replays up to this many of them (before the group's committed offset) into its memories: recent "
        "traces for the feedback join, score baselines, questions per caller, traces held for late strata. Nothing "
        "is stored or counted again. 0: no warm-up (a rebalance then loses those joins and baselines).")
    group_instance_id: str | None = Field(
        None, max_length=249, description="Static group membership (KIP-345): a replica that restarts under the "
        "same id within `session_timeout_ms` gets its partitions back without a rebalance. Give each replica its "
        "own stable id (e.g. the StatefulSet pod name); never two at once.")

    @model_validator(mode="after")
    def _heartbeat_within_session(self) -> KafkaConfig:
        if self.heartbeat_interval_ms * 3 > self.session_timeout_ms:
            raise ValueError(f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be at most a third of "
                             f"session_timeout_ms ({self.session_timeout_ms})")
        return self

    def group_options(self) -> dict[str, Any]:
        """The consumer group's liveness options for kafka-python's consumer."""
        options: dict[str, Any] = {"session_timeout_ms": self.session_timeout_ms,
                                   "heartbeat_interval_ms": self.heartbeat_interval_ms,
                                   "max_poll_interval_ms": self.max_poll_interval_ms}
        if self.group_instance_id:
            options["group_instance_id"] = self.group_instance_id
        return options
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="How to reach the brokers."
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism."
    )
    sasl_username: str | None = Field(None, description="SASL user name.")
    sasl_password: SecretStr | None = Field(None, description="SASL password.")
    ssl_cafile: Path | None = Field(None, description="CA bundle for SSL.")

    def client_options(self) -> dict[str, Any]:
        """Connection options common to kafka-python's consumer, producer and admin client."""
        options: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers,
                                   "security_protocol": self.security_protocol}
        if self.sasl_mechanism:
            options.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.sasl_username,
                           sasl_plain_password=self.sasl_password.get_secret_value() if self.sasl_password else None)
        if self.ssl_cafile:
            options["ssl_cafile"] = str(self.ssl_cafile)
        return options


class LabelStudioConfig(ConfigSection):
    """The Label Studio instance the weekly batch is labeled in (``samples push``, ``labels pull``)."""

    url: HttpUrlText | None = Field(None, description="Base URL, e.g. https://label-studio.example.com.")
    token: SecretStr | None = Field(
        None,
        description="A personal access token (Account & Settings), or a legacy API token where the "
        "organization still allows those.",
    )
    project: str = Field("ragmon regression set", description="Title of the project the batches go to.")
    timeout_seconds: PositiveFloat = Field(30.0, description="Timeout of each request to Label Studio.")


class RegressionConfig(ConfigSection):
    """The labeled regression set that ``labels import`` grows and ``eval`` scores."""

    cases: Path = Field(Path("ragmon-data/regression/cases.jsonl"), description="JSONL file, one case per line.")


class LogConfig(ConfigSection):
    """Process logs (standard error). Lines carry counts, reasons and names of our own, never input content."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")
    format: Literal["text", "json"] = Field("text", description="Log line format.")


class Settings(ConfigSection):
    """The whole effective configuration. Build it with :func:`load_settings`."""

    limits: Limits = Limits()
    events: EventsConfig = EventsConfig()
    dedupe: DedupeConfig = DedupeConfig()
    catalog: CatalogConfig = CatalogConfig()
    findings: FindingsConfig = FindingsConfig()
    dead_letter: DeadLetterConfig = DeadLetterConfig()
    database: DatabaseConfig = DatabaseConfig()
    signals: SignalsConfig = SignalsConfig()
    labels: LabelsConfig = LabelsConfig()
    sampling: SamplingConfig = SamplingConfig()
    redaction: RedactionConfig = RedactionConfig()
    label_studio: LabelStudioConfig = LabelStudioConfig()
    regression: RegressionConfig = RegressionConfig()
    alerts: AlertsConfig = AlertsConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    probes: ProbesConfig = ProbesConfig()
    http: HttpConfig = HttpConfig()
    otlp: OtlpConfig = OtlpConfig()
    kafka: KafkaConfig = KafkaConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    log: LogConfig = LogConfig()


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the YAML file (``path``, else ``$RAGMON_CONFIG``, else none) and apply the environment.

    ``RAGMON_SECTION__KEY=value`` overrides ``section: {key: value}``; values that look like JSON
    lists or objects are parsed as JSON, and an object is merged into what the file gives at its
    path, not put in its place. Two variables giving one key are an error naming both, so the
    result never depends on the environment's order. Variables Kubernetes sets for a Service whose
    name starts with ``ragmon`` are skipped (``environment.is_service_link``). Raises
    :class:`ConfigError` naming the offending key or variables.
    """
    environ = os.environ if environ is None else environ
    if path is None and environ.get(ENV_CONFIG_FILE):
        path = Path(environ[ENV_CONFIG_FILE])
    data = _read_yaml(path) if path is not None else {}
    try:
        apply_environment(data, environ)
    except OverrideError as error:
        raise ConfigError(str(error)) from None
    try:
        return Settings.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error, path)) from None


def check_telemetry_target(settings: Settings) -> None:
    """Refuse a ``telemetry.otlp_endpoint`` that is this process's own port (``http.host`` and
    ``http.port``, which ``serve --host/--port`` replace before the runtime is built): raises
    :class:`ConfigError` naming the key. Not part of :func:`load_settings`, because the address a
    command serves is known only once its options are read."""
    problem = settings.telemetry.loop_problem(settings.http.host, settings.http.port)
    if problem is not None:
        raise ConfigError(f"telemetry.otlp_endpoint: {problem}")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"config file {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of sections")
    return data


def _describe(error: ValidationError, path: Path | None) -> str:
    lines = []
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"])
        if problem["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        elif problem["type"] == "finite_number":
            lines.append(f"{key}: {problem['msg']} (inf, nan and numbers beyond a float's range are refused)")
        else:
            lines.append(f"{key}: {problem['msg']}")
    origin = f" (file {path} and RAGMON_ environment)" if path else " (RAGMON_ environment)"
    return "invalid configuration" + origin + ":\n  " + "\n  ".join(lines)


def effective_config(settings: Settings) -> dict[str, Any]:
    """The configuration as plain data with every secret masked, for display."""
    data = settings.model_dump(mode="python")
    _mask_secrets(settings, data)
    return _plain(data)


_SECRET_PARAMETERS = frozenset({"token", "access_token", "auth", "key", "api_key", "apikey", "secret", "password",
                                "passwd", "pwd", "sig", "signature", "x-amz-signature", "code"})


def mask_url(url: str) -> str:
    """Hide what a URL carries as a credential, keeping the rest readable: the password of
    ``user:password@`` and the values of query parameters such as ``token``, ``key`` or
    ``signature``."""
    parts = urlsplit(url)
    masked = parts
    if parts.password is not None:
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        masked = masked._replace(netloc=f"{parts.username or ''}:{MASK}@{host}")
    if parts.query:
        pairs = [pair.partition("=") for pair in parts.query.split("&")]
        masked = masked._replace(query="&".join(
            f"{name}={MASK}" if equals and name.lower() in _SECRET_PARAMETERS else f"{name}{equals}{value}"
            for name, equals, value in pairs))
    return url if masked == parts else urlunsplit(masked)  # unchanged: as given (sqlite:/// stays)


def _mask_secrets(model: BaseModel, data: dict[str, Any]) -> None:
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            data[name] = MASK if value.get_secret_value() else ""
        elif isinstance(value, BaseModel):
            _mask_secrets(value, data[name])


def _plain(value: Any) -> Any:
    """Plain data for display; every string that is a URL has its credentials masked."""
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


_DOC_INTRO = """# Configuration

Generated from `monitor/config/settings.py` by `python -m ragmon.monitor.config.settings > docs/configuration.md`.

One YAML file plus environment overrides. The file is given with `--config FILE` or
`RAGMON_CONFIG=FILE`; without one, the defaults below apply. Any key can be overridden with
`RAGMON_<SECTION>__<KEY>` (double underscore between levels), e.g. `RAGMON_HTTP__PORT=9000`;
values that look like JSON lists or objects are parsed as JSON
(`RAGMON_LABELS__TENANTS='["acme","globex"]'`). The environment wins over the file.

A JSON object is merged into what the file gives at its place, key by key and at every depth; it
never replaces it. So `RAGMON_HTTP='{"port": 4418}'` changes the port and keeps every other key
of the file's `http` section, its `token` included; a list or any other value replaces the file's.
Two variables that give the same key, such as `RAGMON_HTTP='{"token": "…"}'` beside
`RAGMON_HTTP__TOKEN`, or `RAGMON_HTTP='x'` beside `RAGMON_HTTP__PORT`, are an error naming both
variables: which one would win would depend on the order of the environment. A section variable
and field variables for other keys of it merge, in any order.

Numbers are finite: `inf`, `nan` and their other spellings (`.inf` and `.nan` in YAML,
`Infinity` and `NaN` in JSON, `1e999`, which overflows to infinity) are refused for every setting,
lists and mappings included, with an error naming the key; an infinite bound would switch its
check off. Command-line options that are bounds (`healthcheck --timeout`, `demo --seconds`,
`eval --max-drop` and `--fail-under`) refuse them as well.

Unknown keys are errors, in the file and in `RAGMON_` variables alike, and every error names its
key. The one exception: the variables a kubelet sets for a Service whose name starts with
`ragmon` (`RAGMON_SERVICE_HOST`, `RAGMON_PORT`, `RAGMON_PROD_PORT_4318_TCP_ADDR`, …; recognised by
their shape and the `<SERVICE>_SERVICE_HOST` set with them) are skipped, with a DEBUG log line.
`ragmon config check` validates and prints the effective configuration with secrets masked.

```yaml
# an example file
database:
  url: postgresql+psycopg://ragmon:${PASSWORD}@db:5432/ragmon   # (expand the password yourself)
signals:
  low_score_thresholds:
    policies: {vector: 0.55, bm25: 4.0}
labels:
  tenants: [acme, globex]
http:
  host: 0.0.0.0
```
"""


def reference_markdown() -> str:
    """docs/configuration.md, generated from the config model (a test keeps the file equal)."""
    lines = [_DOC_INTRO]
    for section, field in Settings.model_fields.items():
        model = field.annotation
        lines += [f"### `{section}`", "", (model.__doc__ or "").strip(), "",
                  "| key | default | environment | meaning |", "|---|---|---|---|"]
        for key, spec in model.model_fields.items():
            default = spec.default_factory() if spec.default_factory is not None else spec.default
            shown = "(secret)" if spec.annotation in (SecretStr, SecretStr | None) and default else json.dumps(
                _plain(default), default=str)
            env = f"`RAGMON_{section.upper()}__{key.upper()}`"
            cell = shown.replace("|", "\\|")
            lines.append(f"| `{key}` | `{cell}` | {env} | {spec.description or ''} |")
        lines.append("")
    for model in SOURCE_MODELS:
        lines += _source_table(model)
    return "\n".join(lines)


def _source_table(model: type[BaseModel]) -> list[str]:
    """The keys of one kind of ``catalog.sources`` entry (set in the file, or as a JSON list in
    ``RAGMON_CATALOG__SOURCES``)."""
    kind = model.model_fields["kind"].annotation.__args__[0]  # type: ignore[union-attr]
    lines = [f"### `catalog.sources` entries of kind `{kind}`", "", " ".join((model.__doc__ or "").split()), "",
             "| key | default | meaning |", "|---|---|---|"]
    for key, spec in model.model_fields.items():
        if spec.is_required():
            shown = "(required)"
        else:
            default = spec.default_factory() if spec.default_factory is not None else spec.default
            if isinstance(default, BaseModel):
                default = default.model_dump()
            shown = json.dumps(_plain(default), default=str)
        cell, meaning = shown.replace("|", "\\|"), (spec.description or "").replace("|", "\\|")
        lines.append(f"| `{key}` | `{cell}` | {meaning} |")
    lines.append("")
    return lines


if __name__ == "__main__":
    print(reference_markdown(), end="")
