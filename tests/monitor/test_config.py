"""Config: YAML plus environment, errors that name the key, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmon.monitor.config.settings import ConfigError, effective_config, load_settings, mask_url


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragmon.yaml"
    path.write_text(text)
    return path


def test_defaults_without_file_or_environment():
    settings = load_settings(environ={})
    assert settings.limits.max_event_bytes == 1024 * 1024
    assert settings.database.url.startswith("sqlite:///")


def test_environment_overrides_yaml(tmp_path):
    path = write(tmp_path, "limits:\n  max_id_length: 100\n  max_text_length: 500\n")
    settings = load_settings(path, environ={"RAGMON_LIMITS__MAX_ID_LENGTH": "64"})
    assert settings.limits.max_id_length == 64
    assert settings.limits.max_text_length == 500


def test_config_file_from_environment(tmp_path):
    path = write(tmp_path, "log:\n  level: DEBUG\n")
    assert load_settings(environ={"RAGMON_CONFIG": str(path)}).log.level == "DEBUG"


@pytest.mark.parametrize(
    ("yaml_text", "environ", "message"),
    [
        ("limits:\n  max_event_byte: 10\n", {}, "limits.max_event_byte: unknown key"),
        ("limitz: {}\n", {}, "limitz: unknown key"),
        ("limits:\n  max_event_bytes: -3\n", {}, "limits.max_event_bytes: Input should be greater than 0"),
        ("log:\n  level: LOUD\n", {}, "log.level"),
        ("", {"RAGMON_LIMITS__MAX_ID_LENGHT": "4"}, "limits.max_id_lenght: unknown key"),
        ("", {"RAGMON_LIMITS__MAX_ID_LENGTH": "many"}, "limits.max_id_length"),
        ("", {"RAGMON_NOPE": "1"}, "nope: unknown key"),
        ("", {"RAGMON_LIMITS__": "1"}, "RAGMON_LIMITS__: empty key"),
        ("- a\n- b\n", {}, "top level must be a mapping"),
        ("limits: [\n", {}, "not valid YAML"),
    ],
)
def test_bad_config_is_an_error_naming_the_key(tmp_path, yaml_text, environ, message):
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, yaml_text), environ=environ)
    assert message in str(caught.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nowhere.yaml"):
        load_settings(tmp_path / "nowhere.yaml", environ={})


def test_effective_config_masks_database_password():
    settings = load_settings(environ={"RAGMON_DATABASE__URL": "postgresql+psycopg://ragmon:hunter2@db:5432/ragmon"})
    shown = effective_config(settings)
    assert shown["database"]["url"] == "postgresql+psycopg://ragmon:****@db:5432/ragmon"
    assert "hunter2" not in repr(shown)
    assert mask_url("sqlite:///x.db") == "sqlite:///x.db"


def test_effective_config_masks_credentials_inside_every_url():
    settings = load_settings(environ={
        "RAGMON_LABEL_STUDIO__URL": "https://admin:ls-pass-1@labels.example.com/",
        "RAGMON_ALERTS__WEBHOOK_URL": "https://hooks.example.com/ragmon?channel=ops&token=hook-secret-2",
        "RAGMON_ALERTS__ALERTMANAGER_URL": "http://alertmanager:9093/?api_key=am-secret-3&x=1",
    })
    shown = effective_config(settings)
    assert shown["label_studio"]["url"] == "https://admin:****@labels.example.com/"
    assert shown["alerts"]["webhook_url"] == "https://hooks.example.com/ragmon?channel=ops&token=****"
    assert shown["alerts"]["alertmanager_url"] == "http://alertmanager:9093/?api_key=****&x=1"
    for secret in ("ls-pass-1", "hook-secret-2", "am-secret-3"):
        assert secret not in repr(shown)


@pytest.mark.parametrize(("environ", "message"), [
    ({"RAGMON_HTTP__TLS_CERT_FILE": "/etc/ragmon/tls.pem"}, "tls_cert_file and tls_key_file go together"),
    ({"RAGMON_HTTP__TLS_CLIENT_CA_FILE": "/etc/ragmon/clients.pem"}, "mutual TLS is TLS first"),
])
def test_half_a_tls_setup_is_an_error_naming_what_is_missing(environ, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(environ=environ)


def test_the_consumer_group_liveness_settings_reach_kafka_python_and_are_checked():
    kafka = load_settings(environ={"RAGMON_KAFKA__SESSION_TIMEOUT_MS": "6000",
                                   "RAGMON_KAFKA__HEARTBEAT_INTERVAL_MS": "2000",
                                   "RAGMON_KAFKA__GROUP_INSTANCE_ID": "ragmon-0"}).kafka
    assert kafka.group_options() == {"session_timeout_ms": 6000, "heartbeat_interval_ms": 2000,
                                     "max_poll_interval_ms": 60_000, "group_instance_id": "ragmon-0"}
    assert "group_instance_id" not in load_settings(environ={}).kafka.group_options()
    with pytest.raises(ConfigError, match="heartbeat_interval_ms .* at most a third of session_timeout_ms"):
        load_settings(environ={"RAGMON_KAFKA__SESSION_TIMEOUT_MS": "6000",
                               "RAGMON_KAFKA__HEARTBEAT_INTERVAL_MS": "3000"})


def test_an_empty_environment_value_is_a_string_not_json():
    assert load_settings(environ={"RAGMON_KAFKA__GROUP_ID": ""}).kafka.group_id == ""


KUBELET_SERVICES = [  # the Services `helm install ragmon` and `helm install ragmon-prod` create
    {"metadata": {"name": name},
     "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 4318, "protocol": "TCP"}]}}
    for name, ip in [("ragmon", "10.96.0.10"), ("ragmon-scheduler", "10.96.0.11"), ("ragmon-prod", "10.96.0.12")]
]


def test_the_variables_kubernetes_sets_for_ragmon_services_are_not_settings():
    from tests.kubelet_env import MASTER, service_links
    injected = service_links([MASTER, *KUBELET_SERVICES])
    assert {"RAGMON_SERVICE_HOST", "RAGMON_PORT", "RAGMON_PORT_4318_TCP_ADDR", "RAGMON_SCHEDULER_SERVICE_PORT_HTTP",
            "RAGMON_PROD_PORT_4318_TCP_PROTO"} <= set(injected)
    settings = load_settings(environ={**injected, "RAGMON_HTTP__PORT": "9000"})
    assert settings.http.port == 9000 and settings.http.host == "127.0.0.1"


@pytest.mark.parametrize("name", ["RAGMON_BOGUS", "RAGMON_HTTP_PORT", "RAGMON_PORTS", "RAGMON_SERVICE_PORTAL__X"])
def test_an_unknown_ragmon_variable_still_fails_beside_the_kubernetes_ones(name):
    from tests.kubelet_env import service_links
    with pytest.raises(ConfigError, match="unknown key"):
        load_settings(environ={**service_links(KUBELET_SERVICES), name: "1"})


def test_a_variable_shaped_like_a_service_link_without_its_service_is_a_setting_error():
    # a mistyped RAGMON_HTTP_PORT is not mistaken for a link of a Service `ragmon-http`: the
    # kubelet would have set RAGMON_HTTP_SERVICE_HOST with it
    with pytest.raises(ConfigError, match="http_port: unknown key"):
        load_settings(environ={"RAGMON_HTTP_PORT": "9000"})
