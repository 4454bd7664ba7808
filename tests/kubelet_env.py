"""The environment a kubelet builds for a container, as Kubernetes' pkg/kubelet/envvars does it:
for every Service of the pod's namespace with a cluster IP, `<NAME>_SERVICE_HOST`,
`<NAME>_SERVICE_PORT` (the first port), `<NAME>_SERVICE_PORT_<PORTNAME>` per named port, and the
Docker-link variables `<NAME>_PORT` (the first port) and `<NAME>_PORT_<port>_<PROTO>` with
`_PROTO`, `_PORT` and `_ADDR`; NAME is the Service name upper-cased with `-` as `_`. With
`enableServiceLinks: false` only the `kubernetes` Service of the default namespace is linked."""

from __future__ import annotations

from collections.abc import Iterable

MASTER = {"metadata": {"name": "kubernetes"},
          "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}


def _name(text: str) -> str:
    return text.replace("-", "_").upper()


def service_links(services: Iterable[dict]) -> dict[str, str]:
    """The variables for ``services`` (Service manifests with ``spec.clusterIP`` set)."""
    env: dict[str, str] = {}
    for service in services:
        ip, ports = service["spec"].get("clusterIP"), service["spec"]["ports"]
        if not ip or ip == "None":
            continue
        prefix = _name(service["metadata"]["name"])
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
        for port in ports:
            if port.get("name"):
                env[f"{prefix}_SERVICE_PORT_{_name(port['name'])}"] = str(port["port"])
        for i, port in enumerate(ports):
            protocol = port.get("protocol") or "TCP"
            address = f"{protocol.lower()}://{ip}:{port['port']}"
            if i == 0:
                env[f"{prefix}_PORT"] = address
            each = f"{prefix}_PORT_{port['port']}_{protocol.upper()}"
            env[each] = address
            env[f"{each}_PROTO"] = protocol.lower()
            env[f"{each}_PORT"] = str(port["port"])
            env[f"{each}_ADDR"] = ip
    return env


def with_cluster_ips(services: Iterable[dict]) -> list[dict]:
    """``services`` as the API server stores them: a ClusterIP Service without one gets an address."""
    stored = []
    for n, service in enumerate(services, start=10):
        spec = dict(service["spec"])
        if spec.get("clusterIP") != "None":
            spec.setdefault("clusterIP", f"10.96.7.{n}")
        stored.append({**service, "spec": spec})
    return stored
