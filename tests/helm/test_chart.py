"""The Helm chart: `helm lint --strict` and `helm template` with several value sets (helm from the
Go module proxy, installed by tests/services/install.sh), and the rendered manifests checked:
recommended labels, probes, security context, secrets by reference, and rules and dashboards equal
to what `ragmon rules render` and `ragmon dashboard render` generate."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ragmon.alerts.render import rule_groups
from ragmon.exporters.chart_schema import render as render_schema
from ragmon.exporters.dashboard import render_dashboards
from ragmon.monitor.config.alerting import AlertsConfig
from ragmon.monitor.config.settings import Settings
from tests.services.harness import helm_binary

CHART = Path(__file__).parents[2] / "helm" / "ragmon"
KUBE = "1.31.0"
CRDS = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
        "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"]
RECOMMENDED = {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
               "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "app.kubernetes.io/component",
               "helm.sh/chart"}
AUTH = ["--set", "auth.existingSecret=ragmon-auth"]  # every install needs the ingest token
VALUE_SETS = {
    "defaults": [],
    "with-crds": CRDS,
    "scaled": [*CRDS, "--set", "collector.autoscaling.enabled=true", "--set", "collector.replicas=4",
               "--set", "serviceMonitor.additionalLabels.release=kube-prometheus-stack",
               "--set", "prometheusRule.additionalLabels.release=kube-prometheus-stack",
               "--set", "secrets.RAGMON_DATABASE__URL.name=ragmon-db",
               "--set", "secrets.RAGMON_DATABASE__URL.key=url",
               "--set", "secrets.RAGMON_LABEL_STUDIO__TOKEN.name=ragmon-ls",
               "--set", "secrets.RAGMON_LABEL_STUDIO__TOKEN.key=token"],
    "embedded-scheduler": ["--set", "scheduler.enabled=false", "--set", "dashboards.enabled=false",
                           "--set", "serviceMonitor.enabled=false",
                           "--set", "collector.podDisruptionBudget.enabled=false"],
}

pytestmark = pytest.mark.integration  # helm, built from the Go module proxy


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(helm_binary()), *args], capture_output=True, text=True)


def render(*args: str) -> list[dict]:
    # a helm built with `go install` carries no Kubernetes version of its own (it assumes 1.20)
    done = helm("template", "rag", str(CHART), "--namespace", "monitoring", "--kube-version", KUBE, *AUTH, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_strict_passes(name):
    done = helm("lint", "--strict", "--kube-version", KUBE, str(CHART), *AUTH,
                *[a for a in VALUE_SETS[name] if not a.startswith("--api") and not a.startswith("monitoring.")])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_object_carries_the_recommended_labels(name):
    for doc in render(*VALUE_SETS[name]):
        labels = doc["metadata"]["labels"]
        assert set(labels) >= RECOMMENDED, (doc["kind"], doc["metadata"]["name"])
        assert labels["app.kubernetes.io/instance"] == "rag" and labels["app.kubernetes.io/part-of"] == "ragmon"


def test_deployments_are_probed_non_root_and_read_only():
    docs = by_kind(render(*VALUE_SETS["scaled"]))
    collector = docs[("Deployment", "rag-ragmon-collector")]
    scheduler = docs[("Deployment", "rag-ragmon-scheduler")]
    for deployment in (collector, scheduler):
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/etc/ragmon", "/data", "/tmp"}
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        secret = next(e for e in container["env"] if e["name"] == "RAGMON_DATABASE__URL")
        assert secret["valueFrom"]["secretKeyRef"] == {"name": "ragmon-db", "key": "url"}
        template_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= template_labels.items()
    assert collector["spec"]["template"]["spec"]["containers"][0]["args"] == ["serve"]
    assert "replicas" not in collector["spec"]  # the autoscaler owns it
    assert {"name": "RAGMON_SCHEDULER__EMBEDDED", "value": "false"} in collector["spec"]["template"]["spec"][
        "containers"][0]["env"]
    assert scheduler["spec"]["replicas"] == 1 and scheduler["spec"]["strategy"] == {"type": "Recreate"}
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["args"] == ["scheduler"]
    assert docs[("HorizontalPodAutoscaler", "rag-ragmon-collector")]["spec"]["maxReplicas"] == 6
    assert docs[("PodDisruptionBudget", "rag-ragmon-collector")]["spec"]["minAvailable"] == 1


def test_the_embedded_layout_runs_the_scheduler_in_the_collectors():
    docs = by_kind(render(*VALUE_SETS["embedded-scheduler"]))
    assert ("Deployment", "rag-ragmon-scheduler") not in docs
    env = docs[("Deployment", "rag-ragmon-collector")]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert not any(e["name"] == "RAGMON_SCHEDULER__EMBEDDED" for e in env)
    assert {kind for kind, _ in docs} == {"ConfigMap", "Deployment", "Service", "NetworkPolicy", "ServiceAccount",
                                          "Job"}


def test_the_config_map_is_a_valid_ragmon_config():
    docs = by_kind(render())
    config = yaml.safe_load(docs[("ConfigMap", "rag-ragmon-config")]["data"]["ragmon.yaml"])
    settings = Settings.model_validate(config)
    assert settings.http.host == "0.0.0.0" and settings.http.port == 4318
    assert settings.kafka.bootstrap_servers == ["kafka:9092"]
    # pushed alerts name the deployment as the ServiceMonitor's targets do: release namespace and name
    assert settings.alerts.push_labels == {"namespace": "monitoring", "job": "rag"}


def test_push_labels_can_be_added_to_and_overridden():
    docs = by_kind(render("--set", "config.alerts.push_labels.prometheus=monitoring/k8s",
                          "--set", "config.alerts.push_labels.job=ragmon-eu"))
    config = yaml.safe_load(docs[("ConfigMap", "rag-ragmon-config")]["data"]["ragmon.yaml"])
    assert Settings.model_validate(config).alerts.push_labels == {
        "namespace": "monitoring", "job": "ragmon-eu", "prometheus": "monitoring/k8s"}


def test_monitoring_objects_follow_the_crds_and_carry_the_generated_content():
    assert not any(d["kind"] in ("ServiceMonitor", "PrometheusRule") for d in render())  # auto, no CRDs
    docs = by_kind(render(*VALUE_SETS["scaled"]))
    rule = docs[("PrometheusRule", "rag-ragmon")]
    assert rule["spec"] == rule_groups(AlertsConfig())  # the same rules as `ragmon rules render`
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    monitor = docs[("ServiceMonitor", "rag-ragmon")]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    selected = monitor["spec"]["selector"]["matchLabels"]
    services = [d for (kind, _), d in docs.items() if kind == "Service"]
    assert len(services) == 2 and all(selected.items() <= s["metadata"]["labels"].items() for s in services)
    # one job for the collector and the scheduler, named as the pushed alerts name it
    jobs = {s["metadata"]["labels"][monitor["spec"]["jobLabel"]] for s in services}
    config = yaml.safe_load(docs[("ConfigMap", "rag-ragmon-config")]["data"]["ragmon.yaml"])
    assert jobs == {config["alerts"]["push_labels"]["job"]} == {"rag"}
    dashboards = docs[("ConfigMap", "rag-ragmon-dashboards")]
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboards["data"] == render_dashboards()
    for text in dashboards["data"].values():
        variables = {v["name"]: v for v in json.loads(text)["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and "${DS_" not in text


def test_a_database_shared_by_every_pod_is_required():
    without = helm("template", "rag", str(CHART), "--kube-version", KUBE, *AUTH,
                   "--set", "secrets.RAGMON_DATABASE__URL=null")
    assert without.returncode != 0 and "every ragmon pod must share one PostgreSQL database" in without.stderr
    in_config = render("--set", "secrets.RAGMON_DATABASE__URL=null",
                       "--set", "config.database.url=postgresql+psycopg://ragmon@db/ragmon")
    assert any(d["kind"] == "Deployment" for d in in_config)


def test_the_values_schema_refuses_a_typo_and_a_wrong_type():
    typo = helm("template", "rag", str(CHART), "--kube-version", KUBE, *AUTH, "--set", "collector.replica=3")
    assert typo.returncode != 0 and "replica" in typo.stderr
    wrong = helm("template", "rag", str(CHART), "--kube-version", KUBE, *AUTH,
                 "--set", "serviceMonitor.enabled=sometimes")
    assert wrong.returncode != 0


def test_an_ingest_token_is_required_and_reaches_every_pod():
    without = helm("template", "rag", str(CHART), "--kube-version", KUBE)
    assert without.returncode != 0 and "auth.existingSecret" in without.stderr
    existing = by_kind(render())
    made = by_kind(render("--set", "auth.existingSecret=", "--set", "auth.token=s3cret"))
    assert ("Secret", "rag-ragmon-auth") not in existing
    assert made[("Secret", "rag-ragmon-auth")]["stringData"] == {"token": "s3cret"}
    for docs, secret in ((existing, "ragmon-auth"), (made, "rag-ragmon-auth")):
        for deployment in ("rag-ragmon-collector", "rag-ragmon-scheduler"):
            env = docs[("Deployment", deployment)]["spec"]["template"]["spec"]["containers"][0]["env"]
            token = next(e for e in env if e["name"] == "RAGMON_HTTP__TOKEN")
            assert token["valueFrom"]["secretKeyRef"] == {"name": secret, "key": "token"}


def test_a_next_ingest_and_read_token_reach_the_pods_while_they_are_rotated():
    def env_of(docs, deployment):
        containers = docs[("Deployment", deployment)]["spec"]["template"]["spec"]["containers"][0]["env"]
        return {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in containers}

    plain = by_kind(render("--set", "readAuth.existingSecret=ragmon-read"))
    nexts = {"RAGMON_HTTP__TOKEN_NEXT", "RAGMON_HTTP__READ_TOKEN_NEXT"}
    assert not nexts & env_of(plain, "rag-ragmon-collector").keys()
    existing = by_kind(render("--set", "auth.nextSecretKey=token-2", "--set", "readAuth.existingSecret=ragmon-read",
                              "--set", "readAuth.nextSecretKey=token-2"))
    collector = env_of(existing, "rag-ragmon-collector")
    assert collector["RAGMON_HTTP__TOKEN_NEXT"] == {"name": "ragmon-auth", "key": "token-2"}
    assert collector["RAGMON_HTTP__READ_TOKEN_NEXT"] == {"name": "ragmon-read", "key": "token-2"}
    assert "RAGMON_HTTP__READ_TOKEN_NEXT" not in env_of(existing, "rag-ragmon-scheduler")  # readers: collectors only
    made = by_kind(render("--set", "auth.existingSecret=", "--set", "auth.token=old", "--set", "auth.nextToken=new",
                          "--set", "readAuth.token=r-old", "--set", "readAuth.nextToken=r-new"))
    assert made[("Secret", "rag-ragmon-auth")]["stringData"] == {"token": "old", "token-next": "new"}
    assert made[("Secret", "rag-ragmon-read")]["stringData"] == {"token": "r-old", "token-next": "r-new"}
    collector = env_of(made, "rag-ragmon-collector")
    assert collector["RAGMON_HTTP__TOKEN_NEXT"] == {"name": "rag-ragmon-auth", "key": "token-next"}
    assert collector["RAGMON_HTTP__READ_TOKEN_NEXT"] == {"name": "rag-ragmon-read", "key": "token-next"}


def test_a_network_policy_admits_only_the_listed_ingest_peers_and_prometheus():
    docs = by_kind(render("--set-json", 'networkPolicy.ingestFrom=[{"namespaceSelector": {"matchLabels": '
                                        '{"team": "rag"}}}]', "--set", "networkPolicy.prometheusNamespace=obs"))
    policy = docs[("NetworkPolicy", "rag-ragmon")]["spec"]
    selected = policy["podSelector"]["matchLabels"]
    for deployment in ("rag-ragmon-collector", "rag-ragmon-scheduler"):  # the policy selects every ragmon pod
        labels = docs[("Deployment", deployment)]["spec"]["template"]["metadata"]["labels"]
        assert selected.items() <= labels.items()
    ingest, scrape = policy["ingress"]
    assert ingest["from"] == [{"namespaceSelector": {"matchLabels": {"team": "rag"}}}]
    assert scrape["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}]
    assert all(rule["ports"] == [{"port": "http", "protocol": "TCP"}] for rule in (ingest, scrape))
    # without listed peers only Prometheus may connect: ingest stays closed until someone is named
    assert len(by_kind(render())[("NetworkPolicy", "rag-ragmon")]["spec"]["ingress"]) == 1


def pods(docs: dict[tuple[str, str], dict]) -> dict[str, dict]:
    """The pod specs of every workload (Deployments and the migration Job), by workload name."""
    return {name: doc["spec"]["template"] for (kind, name), doc in docs.items() if kind in ("Deployment", "Job")}


def test_the_migration_hook_runs_db_upgrade_before_install_upgrade_and_rollback_like_the_pods():
    docs = by_kind(render(*VALUE_SETS["scaled"]))
    job = docs[("Job", "rag-ragmon-migrate")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade,pre-rollback"
    assert "hook-succeeded" in job["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["ragmon", "db", "upgrade"] and pod["restartPolicy"] == "Never"
    collector = docs[("Deployment", "rag-ragmon-collector")]["spec"]["template"]["spec"]
    assert container["image"] == collector["containers"][0]["image"]
    assert container["securityContext"] == collector["containers"][0]["securityContext"]
    assert pod["securityContext"] == collector["securityContext"]
    database = next(e for e in container["env"] if e["name"] == "RAGMON_DATABASE__URL")
    assert database["valueFrom"]["secretKeyRef"] == {"name": "ragmon-db", "key": "url"}
    # a hook runs before the release's own objects exist: nothing of the chart's may be referenced
    assert "RAGMON_HTTP__TOKEN" not in {e["name"] for e in container["env"]} and "serviceAccountName" not in pod
    assert all("configMap" not in volume for volume in pod["volumes"])
    in_config = by_kind(render("--set", "secrets.RAGMON_DATABASE__URL=null",
                               "--set", "config.database.url=postgresql+psycopg://ragmon@db/ragmon"))
    env = in_config[("Job", "rag-ragmon-migrate")]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "RAGMON_DATABASE__URL", "value": "postgresql+psycopg://ragmon@db/ragmon"} in env
    own_account = by_kind(render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ragmon-db-iam"))
    for name, template in pods(own_account).items():
        assert template["spec"]["serviceAccountName"] == "ragmon-db-iam", name
    assert ("Job", "rag-ragmon-migrate") not in by_kind(render("--set", "migrations.enabled=false"))


def test_every_pod_gets_the_usual_knobs_and_no_service_links():
    docs = by_kind(render(
        "--set", "podAnnotations.team=rag", "--set-string", "podLabels.cost-center=42",
        "--set", "serviceAccount.annotations.iam\\.example\\.com/role=ragmon",
        "--set", "existingSecret=ragmon-env", "--set-json", 'envFrom=[{"configMapRef": {"name": "proxy"}}]',
        "--set-json", 'extraEnv=[{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]',
        "--set", "nodeSelector.pool=monitoring",
        "--set-json", 'tolerations=[{"key": "dedicated", "operator": "Exists"}]',
        "--set-json", 'topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", '
                      '"whenUnsatisfiable": "ScheduleAnyway"}]',
        "--set", "collector.nodeSelector.pool=ingest", "--set", "priorityClassName=monitoring",
        "--set-json", 'imagePullSecrets=[{"name": "registry"}]'))
    account = docs[("ServiceAccount", "rag-ragmon")]
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "ragmon"}
    assert account["automountServiceAccountToken"] is False
    workloads = pods(docs)
    assert set(workloads) == {"rag-ragmon-collector", "rag-ragmon-scheduler", "rag-ragmon-migrate"}
    for name, template in workloads.items():
        spec, [container] = template["spec"], template["spec"]["containers"]
        assert spec["enableServiceLinks"] is False, name
        assert template["metadata"]["annotations"]["team"] == "rag"
        assert template["metadata"]["labels"]["cost-center"] == "42"
        assert container["envFrom"] == [{"secretRef": {"name": "ragmon-env"}}, {"configMapRef": {"name": "proxy"}}]
        assert {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
        assert spec["priorityClassName"] == "monitoring" and spec["imagePullSecrets"] == [{"name": "registry"}]
        assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
        assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
        # a component's own placement replaces the chart-wide one
        assert spec["nodeSelector"] == {"pool": "ingest" if name.endswith("collector") else "monitoring"}, name
        if not name.endswith("migrate"):
            assert spec["serviceAccountName"] == "rag-ragmon"
            assert template["metadata"]["annotations"]["checksum/config"]


def test_the_scheduler_keeps_its_batches_on_a_persistent_volume():
    docs = by_kind(render())
    claim = docs[("PersistentVolumeClaim", "rag-ragmon-scheduler")]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    config = yaml.safe_load(docs[("ConfigMap", "rag-ragmon-config")]["data"]["ragmon.yaml"])
    volumes = {v["name"]: v for v in pods(docs)["rag-ragmon-scheduler"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {"claimName": "rag-ragmon-scheduler"}}
    assert config["scheduler"]["batch_dir"].startswith("/data/")  # on that volume
    collector_volumes = {v["name"]: v for v in pods(docs)["rag-ragmon-collector"]["spec"]["volumes"]}
    assert collector_volumes["data"] == {"name": "data", "emptyDir": {}}
    existing = by_kind(render("--set", "scheduler.persistence.existingClaim=batches"))
    assert ("PersistentVolumeClaim", "rag-ragmon-scheduler") not in existing
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "batches"}} in pods(existing)[
        "rag-ragmon-scheduler"]["spec"]["volumes"]
    ephemeral = by_kind(render("--set", "scheduler.persistence.enabled=false"))
    assert not any(kind == "PersistentVolumeClaim" for kind, _ in ephemeral)


@pytest.mark.parametrize(("setting", "message"), [
    ("config.bogus=1", "additional properties 'bogus' not allowed"),
    ("config.kafka.session_timeout_ms=soon", "/config/kafka/session_timeout_ms"),
    ("config.sampling.unknwon=3", "additional properties 'unknwon' not allowed"),
    ("config.http.host=10.0.0.1", "/config/http/host"),  # the chart sets the address itself
    ("config.database.url=sqlite:///local.db", "every ragmon pod must share one PostgreSQL database"),
])
def test_the_config_section_is_checked_at_render_time(setting, message):
    done = helm("template", "rag", str(CHART), "--kube-version", KUBE, *AUTH, "--set", setting)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_the_values_schema_config_part_is_generated_from_the_config_models():
    path = CHART / "values.schema.json"
    checked_in = path.read_text(encoding="utf-8")
    assert render_schema(json.loads(checked_in)) == checked_in, (
        "helm/ragmon/values.schema.json is stale: "
        "python -m ragmon.exporters.chart_schema helm/ragmon/values.schema.json")
