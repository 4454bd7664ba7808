"""The chart's read side (docs/deployment.md, "The read side"): the read token from a Secret of its
own and given to the collectors alone, the status page and read API on a port of their own that
the NetworkPolicy opens to `networkPolicy.readFrom` alone, the Services' names in
`http.allowed_hosts`, and a ServiceMonitor that scrapes with the metrics token when one is set."""

from __future__ import annotations

import pytest
import yaml

from ragmon.monitor.config.settings import Settings
from tests.helm.test_chart import CHART, CRDS, KUBE, by_kind, helm, pods, render

pytestmark = pytest.mark.integration  # helm, built from the Go module proxy

READERS = '[{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}]'
INGEST = '[{"namespaceSelector": {"matchLabels": {"team": "rag"}}}]'


def env_of(docs: dict, workload: str) -> dict[str, dict]:
    return {e["name"]: e for e in pods(docs)[workload]["spec"]["containers"][0]["env"]}


def config_of(docs: dict) -> Settings:
    return Settings.model_validate(yaml.safe_load(docs[("ConfigMap", "rag-ragmon-config")]["data"]["ragmon.yaml"]))


def test_the_read_token_comes_from_its_own_secret_to_the_collectors_alone():
    made = by_kind(render("--set", "readAuth.token=r3ad-token"))
    assert made[("Secret", "rag-ragmon-read")]["stringData"] == {"token": "r3ad-token"}
    existing = by_kind(render("--set", "readAuth.existingSecret=ragmon-read", "--set", "readAuth.secretKey=value"))
    assert ("Secret", "rag-ragmon-read") not in existing
    for docs, reference in ((made, {"name": "rag-ragmon-read", "key": "token"}),
                            (existing, {"name": "ragmon-read", "key": "value"})):
        collector = env_of(docs, "rag-ragmon-collector")
        assert collector["RAGMON_HTTP__READ_TOKEN"]["valueFrom"]["secretKeyRef"] == reference
        assert collector["RAGMON_HTTP__TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "ragmon-auth"  # another
        for other in ("rag-ragmon-scheduler", "rag-ragmon-migrate"):  # they serve no reads
            assert "RAGMON_HTTP__READ_TOKEN" not in env_of(docs, other), other
    without = by_kind(render())
    assert "RAGMON_HTTP__READ_TOKEN" not in env_of(without, "rag-ragmon-collector")
    assert not any(kind == "Secret" for kind, _ in without)
    twice = helm("template", "rag", str(CHART), "--kube-version", KUBE, "--set", "auth.existingSecret=ragmon-auth",
                 "--set", "readAuth.existingSecret=ragmon-read", "--set", "secrets.RAGMON_HTTP__READ_TOKEN.name=x",
                 "--set", "secrets.RAGMON_HTTP__READ_TOKEN.key=y")
    assert twice.returncode != 0 and "the read token is given twice" in twice.stderr


def test_the_read_side_has_a_port_of_its_own_and_only_readers_may_reach_it():
    docs = by_kind(render("--set-json", f"networkPolicy.readFrom={READERS}",
                          "--set-json", f"networkPolicy.ingestFrom={INGEST}", "--set", "service.readPort=4400"))
    [collector] = pods(docs)["rag-ragmon-collector"]["spec"]["containers"]
    assert collector["ports"] == [{"name": "http", "containerPort": 4318, "protocol": "TCP"},
                                  {"name": "read", "containerPort": 4400, "protocol": "TCP"}]
    assert [p["name"] for p in pods(docs)["rag-ragmon-scheduler"]["spec"]["containers"][0]["ports"]] == ["http"]
    service = docs[("Service", "rag-ragmon")]["spec"]["ports"]
    assert {(p["name"], p["port"], p["targetPort"]) for p in service} == {("http", 4318, "http"),
                                                                          ("read", 4400, "read")}
    assert [p["name"] for p in docs[("Service", "rag-ragmon-scheduler")]["spec"]["ports"]] == ["http"]
    assert config_of(docs).http.read_port == 4400 and config_of(docs).http.port == 4318
    rules = {rule["from"][0]["namespaceSelector"]["matchLabels"].get("kubernetes.io/metadata.name", "ingest"):
             rule for rule in docs[("NetworkPolicy", "rag-ragmon")]["spec"]["ingress"]}
    assert set(rules) == {"ingest", "ingress", "monitoring"}
    assert rules["ingress"]["ports"] == [{"port": "read", "protocol": "TCP"}]  # readers: the read port alone
    assert rules["ingest"]["ports"] == rules["monitoring"]["ports"] == [{"port": "http", "protocol": "TCP"}]
    # nobody listed: nobody may read over the network
    closed = by_kind(render())[("NetworkPolicy", "rag-ragmon")]["spec"]["ingress"]
    assert all(rule["ports"] == [{"port": "http", "protocol": "TCP"}] for rule in closed)


def test_without_a_read_port_everything_is_on_one_port_readers_included():
    docs = by_kind(render("--set", "service.readPort=null", "--set-json", f"networkPolicy.readFrom={READERS}"))
    assert config_of(docs).http.read_port is None
    assert [p["name"] for p in docs[("Service", "rag-ragmon")]["spec"]["ports"]] == ["http"]
    assert [p["name"] for p in pods(docs)["rag-ragmon-collector"]["spec"]["containers"][0]["ports"]] == ["http"]
    readers = docs[("NetworkPolicy", "rag-ragmon")]["spec"]["ingress"][0]
    assert readers["ports"] == [{"port": "http", "protocol": "TCP"}]
    same = helm("template", "rag", str(CHART), "--kube-version", KUBE, "--set", "auth.existingSecret=ragmon-auth",
                "--set", "service.readPort=4318")
    assert same.returncode != 0 and "service.readPort must differ from service.port" in same.stderr
    chosen = helm("template", "rag", str(CHART), "--kube-version", KUBE, "--set", "auth.existingSecret=ragmon-auth",
                  "--set", "config.http.read_port=5000")
    assert chosen.returncode != 0 and "/config/http/read_port" in chosen.stderr  # the chart's, from service


def test_the_services_names_are_hosts_requests_may_name():
    docs = by_kind(render("--set-json", 'config.http.allowed_hosts=["ragmon.example.com"]',
                          "--set", "clusterDomain=k8s.internal"))
    hosts = config_of(docs).http.allowed_hosts
    assert hosts[0] == "ragmon.example.com"  # the user's first, then each Service's names
    for service in ("rag-ragmon", "rag-ragmon-scheduler"):
        assert {service, f"{service}.monitoring", f"{service}.monitoring.svc",
                f"{service}.monitoring.svc.k8s.internal"} <= set(hosts)
    assert len(hosts) == len(set(hosts)) == 9


def test_the_service_monitor_scrapes_with_the_metrics_token_when_one_is_set():
    plain = by_kind(render(*CRDS))[("ServiceMonitor", "rag-ragmon")]["spec"]["endpoints"]
    assert plain == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    guarded = by_kind(render(*CRDS, "--set", "secrets.RAGMON_HTTP__METRICS_TOKEN.name=ragmon-metrics",
                             "--set", "secrets.RAGMON_HTTP__METRICS_TOKEN.key=token"))
    [endpoint] = guarded[("ServiceMonitor", "rag-ragmon")]["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["bearerTokenSecret"] == {"name": "ragmon-metrics", "key": "token"}
    for workload in ("rag-ragmon-collector", "rag-ragmon-scheduler"):  # both expose /metrics behind it
        assert env_of(guarded, workload)["RAGMON_HTTP__METRICS_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "ragmon-metrics", "key": "token"}
