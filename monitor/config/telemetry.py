"""The ``telemetry`` config section: ragmon's own traces (a span per processed batch and per
scheduled job run, ``monitor/app/telemetry.py``), and the rule that keeps them out of this
process's own receiver."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from pydantic import Field, PositiveFloat, PositiveInt, SecretStr, model_validator

from ragmon.monitor.config.section import ConfigSection, HttpUrlText

WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # a listener on every address of the machine


class TelemetryConfig(ConfigSection):
    """ragmon's own spans over OTLP/HTTP, one per processed batch and per job run; off unless `otlp_endpoint` is set."""

    otlp_endpoint: HttpUrlText | None = Field(
        None, description="OTLP/HTTP traces URL, path included (e.g. http://otel-collector:4318/v1/traces), that "
        "ragmon sends its own spans to; unset: no self-tracing. This process's own address and port (`http.host`, "
        "`http.port`, loopback names alike) are refused: ragmon would trace the export of its own spans.")
    otlp_token: SecretStr | None = Field(None, description="Bearer token sent with each export, if set.")
    timeout_seconds: PositiveFloat = Field(
        10.0, description="Time one export may take, its retries included; then its spans count as failed.")
    export_interval_seconds: PositiveFloat = Field(
        5.0, description="Finished spans are exported at least this often (sooner once `max_export_spans` wait).")
    max_queue_spans: PositiveInt = Field(
        2048, description="Finished spans waiting for export at most; beyond it, new ones are dropped and counted "
        "(`ragmon_telemetry_spans_total{outcome=\"dropped\"}`): a slow collector never holds the pipeline.")
    max_export_spans: PositiveInt = Field(512, description="Spans per export request at most.")

    @model_validator(mode="after")
    def _batch_within_queue(self) -> TelemetryConfig:
        if self.max_export_spans > self.max_queue_spans:
            raise ValueError("max_export_spans must not exceed max_queue_spans")
        return self

    def loop_problem(self, host: str, port: int) -> str | None:
        """Why ``otlp_endpoint`` must be refused for a process serving ``host``:``port``, or None.

        The endpoint is refused when it reaches this process: the same port, on the address served,
        on a loopback name while the address served is loopback or every address (``0.0.0.0``,
        ``::``), or on this machine's host name while every address is served. A name that only
        DNS or a load balancer routes back here (a Kubernetes Service in front of this pod) is not
        recognised; docs/deployment.md says so."""
        if self.otlp_endpoint is None:
            return None
        parts = urlsplit(self.otlp_endpoint)
        try:
            target_port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return "the port is not a number"
        if target_port != port or not _reaches(parts.hostname or "", host):
            return None
        return (f"{self.otlp_endpoint} is this process's own port (http.host {host}, http.port {port}): ragmon "
                "would trace the batches of its own spans without end; send them to a collector")


def _reaches(target: str, served: str) -> bool:
    """Whether connecting to ``target`` reaches a listener on ``served`` on this machine."""
    target, served = _canonical(target), _canonical(served)
    if target == served:
        return True
    if _is_loopback(target):  # connecting to 0.0.0.0 reaches this machine as well
        return _is_loopback(served) or served in WILDCARDS
    return served in WILDCARDS and target in _host_names()


def _canonical(host: str) -> str:
    host = host.strip("[]").lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(host))  # ::ffff:127.0.0.1 and 0:0::1 written one way
    except ValueError:
        return host


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "0.0.0.0", "::") or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _host_names() -> set[str]:
    """This machine's own names, as read locally (no DNS query)."""
    name = socket.gethostname().lower()
    return {name, name.split(".")[0]}
