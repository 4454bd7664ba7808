"""Config: YAML plus environment, errors that name the key, secrets masked."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import UnionType
from typing import Annotated, Union, get_args, get_origin

import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from ragmon.monitor.app.cli import main
from ragmon.monitor.config.settings import ConfigError, Settings, effective_config, load_settings, mask_url


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


# A section given whole in one variable is merged into the file's, never put in its place; two variables
# giving one key are an error naming both, whatever the order of the environment.

FILE_WITH_TOKEN = "http:\n  token: file-token-4c1f\n  max_body_bytes: 1000\n"


def test_a_section_variable_is_merged_into_the_files_section_keeping_its_token(tmp_path):
    settings = load_settings(write(tmp_path, FILE_WITH_TOKEN), environ={"RAGMON_HTTP": '{"port": 4418}'})
    assert settings.http.port == 4418
    assert settings.http.token is not None and settings.http.token.get_secret_value() == "file-token-4c1f"
    assert settings.http.max_body_bytes == 1000


def both_orders(first: tuple[str, str], second: tuple[str, str]) -> list[dict[str, str]]:
    """The same two variables in both orders: the environment's order is not the operator's to choose."""
    return [dict([first, second]), dict([second, first])]


@pytest.mark.parametrize("environ", both_orders(("RAGMON_HTTP", '{"port": 4418, "token": "section-token"}'),
                                                ("RAGMON_HTTP__TOKEN", "field-token")))
def test_a_section_variable_and_a_field_variable_giving_the_same_key_are_an_error_naming_both(tmp_path, environ):
    assert list(environ) in (["RAGMON_HTTP", "RAGMON_HTTP__TOKEN"], ["RAGMON_HTTP__TOKEN", "RAGMON_HTTP"])
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, FILE_WITH_TOKEN), environ=environ)
    message = str(caught.value)
    assert "RAGMON_HTTP and RAGMON_HTTP__TOKEN" in message and "http.token" in message
    assert "section-token" not in message and "field-token" not in message  # values may be secrets


@pytest.mark.parametrize("environ", both_orders(("RAGMON_HTTP", '{"port": 4418}'), ("RAGMON_HTTP__TOKEN", "env-t")))
def test_a_section_variable_and_a_field_variable_for_different_keys_merge_in_either_order(tmp_path, environ):
    http = load_settings(write(tmp_path, FILE_WITH_TOKEN), environ=environ).http
    assert (http.port, http.token.get_secret_value(), http.max_body_bytes) == (4418, "env-t", 1000)


@pytest.mark.parametrize(("first", "second", "where"), [
    (("RAGMON_HTTP", "not-an-object"), ("RAGMON_HTTP__PORT", "4418"), "`http`"),  # a value where a section goes
    (("RAGMON_HTTP__PORT", "4418"), ("RAGMON_http__port", "4419"), "`http.port`"),  # one key spelt twice
    (("RAGMON_SIGNALS", '{"low_score_thresholds": {"policies": {"vector": 0.5}}}'),
     ("RAGMON_SIGNALS__LOW_SCORE_THRESHOLDS__POLICIES", '{"vector": 0.6}'),
     "`signals.low_score_thresholds.policies.vector`"),
])
def test_any_two_variables_giving_one_key_are_an_error_in_either_order(first, second, where):
    for environ in both_orders(first, second):
        with pytest.raises(ConfigError) as caught:
            load_settings(environ=environ)
        names = sorted([first[0], second[0]])
        assert f"environment variables {names[0]} and {names[1]} both give {where}" in str(caught.value)


def test_objects_merge_at_every_depth_and_lists_replace(tmp_path):
    path = write(tmp_path, "signals:\n  low_score_thresholds:\n    policies: {bm25: 4.0}\n"
                           "  keyword_retrievers: [bm25, sparse]\nlabels:\n  tenants: [acme]\n")
    settings = load_settings(path, environ={
        "RAGMON_SIGNALS": '{"low_score_thresholds": {"policies": {"vector": 0.55}, "wiki": {"vector": 0.4}}}',
        "RAGMON_SIGNALS__KEYWORD_RETRIEVERS": '["keyword"]',
        "RAGMON_LABELS": '{"tenants": ["globex"]}',
    })
    assert settings.signals.low_score_thresholds == {"policies": {"bm25": 4.0, "vector": 0.55}, "wiki": {"vector": 0.4}}
    assert settings.signals.keyword_retrievers == ["keyword"]
    assert settings.labels.tenants == ["globex"]


def test_a_variable_below_something_in_the_file_that_is_not_a_section_names_both(tmp_path):
    with pytest.raises(ConfigError, match=r"RAGMON_HTTP__PORT: `http` in the config file is not a section"):
        load_settings(write(tmp_path, "http: 5\n"), environ={"RAGMON_HTTP__PORT": "4418"})
    assert load_settings(write(tmp_path, "http:\n"), environ={"RAGMON_HTTP__PORT": "4418"}).http.port == 4418


def ragmon_config_check(tmp_path: Path, file_text: str, variables: dict[str, str]) -> subprocess.CompletedProcess:
    """``ragmon --config FILE config check -o json`` as a process, given ``variables`` in their order."""
    environ = {name: value for name, value in os.environ.items() if not name.startswith("RAGMON_")}
    environ.update(variables)
    return subprocess.run([sys.executable, "-m", "ragmon", "--config", str(write(tmp_path, file_text)), "config",
                           "check", "-o", "json"], env=environ, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def test_config_check_keeps_the_files_token_under_a_section_variable_and_names_a_conflict(tmp_path):
    done = ragmon_config_check(tmp_path, FILE_WITH_TOKEN, {"RAGMON_HTTP": '{"port": 4418}'})
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["http"]
    assert (shown["port"], shown["token"], shown["max_body_bytes"]) == (4418, "****", 1000)
    assert "file-token-4c1f" not in done.stdout + done.stderr
    for variables in both_orders(("RAGMON_HTTP", '{"port": 4418, "token": "section-token"}'),
                                 ("RAGMON_HTTP__TOKEN", "field-token")):
        done = ragmon_config_check(tmp_path, FILE_WITH_TOKEN, variables)
        assert done.returncode == 2, done.stdout
        assert "RAGMON_HTTP and RAGMON_HTTP__TOKEN both give `http.token`" in done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr


# inf and nan are no bounds: refused for every float of every section, however spelt.

@pytest.mark.parametrize("key", ["http.body_timeout_seconds", "limits.max_clock_skew_seconds",
                                 "findings.per_signal_per_second"])
@pytest.mark.parametrize("spelling", [".inf", ".Inf", "-.inf", ".nan", ".NaN", "1.0e+999"])
def test_an_infinite_bound_in_the_file_is_refused_naming_the_key(tmp_path, key, spelling):
    section, field = key.split(".")
    with pytest.raises(ConfigError, match=rf"{key}: Input should be a finite number"):
        load_settings(write(tmp_path, f"{section}:\n  {field}: {spelling}\n"), environ={})


@pytest.mark.parametrize("key", ["http.body_timeout_seconds", "limits.max_clock_skew_seconds",
                                 "findings.per_signal_per_second"])
@pytest.mark.parametrize(("given_as", "spelling"), [
    *[("field", spelling) for spelling in ("inf", "Infinity", "+inf", "-inf", "nan", "NaN", "1e999")],
    *[("section", spelling) for spelling in ("Infinity", "-Infinity", "NaN", "1e999", '"inf"')],  # JSON
])
def test_an_infinite_bound_in_the_environment_is_refused_naming_the_key(key, given_as, spelling):
    section, field = key.split(".")
    environ = ({f"RAGMON_{section.upper()}__{field.upper()}": spelling} if given_as == "field"
               else {f"RAGMON_{section.upper()}": f'{{"{field}": {spelling}}}'})
    with pytest.raises(ConfigError, match=rf"{key}: Input should be a finite number"):
        load_settings(environ=environ)


DICT_KEYS = {("sampling", "rates"): "random"}  # keys a mapping of numbers accepts; any other takes "x"


def float_fields(model: type[BaseModel], path: tuple = ()) -> list[tuple]:
    """Paths to every float a value of ``model`` can hold: its fields, and inside mappings
    (a key), lists (index 0), optional values and nested sections."""
    found = []
    for name, field in model.model_fields.items():
        found += _floats_in(field.annotation, (*path, name))
    return found


def _floats_in(annotation, path: tuple) -> list[tuple]:
    if get_origin(annotation) is Annotated:
        return _floats_in(get_args(annotation)[0], path)
    if annotation is float:
        return [path]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return float_fields(annotation, path)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict:
        return _floats_in(args[1], (*path, DICT_KEYS.get(path, "x")))
    if origin is list:
        return _floats_in(args[0], (*path, 0))
    if origin in (Union, UnionType):
        return [found for arg in args for found in _floats_in(arg, path)]
    return []


def nested(path: tuple, value):
    """``value`` placed at ``path`` in empty mappings and lists."""
    for step in reversed(path):
        value = [value] if isinstance(step, int) else {step: value}
    return value


# the entries of catalog.sources need a kind and their required keys: their floats are swept in
# tests/collectors/catalog_sources/test_source_config.py
FLOAT_PATHS = [path for path in float_fields(Settings) if path[:2] != ("catalog", "sources")]


def test_the_sweep_reaches_every_kind_of_float():
    assert len(FLOAT_PATHS) > 40
    for path in [("http", "body_timeout_seconds"), ("limits", "max_clock_skew_seconds"),
                 ("findings", "per_signal_per_second"), ("signals", "low_score_thresholds", "x", "x"),
                 ("sampling", "rates", "random"), ("kafka", "max_dead_letter_ratio"),
                 ("alerts", "no_answer_min_ratio")]:
        assert path in FLOAT_PATHS


@pytest.mark.parametrize("path", FLOAT_PATHS, ids=lambda path: ".".join(map(str, path)))
def test_no_float_setting_takes_inf_or_nan_from_the_file_or_the_environment(tmp_path, path):
    key = ".".join(map(str, path))
    refused = rf"{re.escape(key)}: Input should be a finite number"
    for value in (math.inf, -math.inf, math.nan):
        with pytest.raises(ConfigError, match=refused):
            load_settings(write(tmp_path, yaml.safe_dump(nested(path, value))), environ={})
        section = f"RAGMON_{path[0].upper()}"
        with pytest.raises(ConfigError, match=refused):  # a whole section as JSON (Infinity, NaN)
            load_settings(environ={section: json.dumps(nested(path[1:], value))})
    if not any(isinstance(step, int) for step in path):
        for spelling in ("inf", "nan"):
            with pytest.raises(ConfigError, match=refused):
                load_settings(environ={"RAGMON_" + "__".join(str(step).upper() for step in path): spelling})


# float bounds on the command line

def invoke(args: list[str], tmp_path: Path):
    environ = {**{k: None for k in os.environ if k.startswith("RAGMON_")},
               "RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl")}
    return CliRunner().invoke(main, args, env=environ)


@pytest.mark.parametrize(("args", "option"), [
    (["healthcheck", "--timeout", "inf"], "--timeout"),
    (["healthcheck", "--timeout", "nan"], "--timeout"),
    (["demo", "--traces", "5", "--seconds", "inf"], "--seconds"),
    (["demo", "--traces", "5", "--seconds", "-Infinity"], "--seconds"),
])
def test_a_command_line_bound_refuses_inf_and_nan(tmp_path, args, option):
    result = invoke(args, tmp_path)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output and "is not a finite number" in result.output


def test_the_evaluation_gate_refuses_nan_floors_and_drops(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "q1", "question": "?", "expected": "answer", "relevant": [{"doc_id": "c4"}]}\n')
    run = tmp_path / "run.jsonl"
    run.write_text('{"case_id": "q1", "retrieved": [{"id": "c9"}]}\n')
    baseline = tmp_path / "baseline.json"
    baseline.write_text(invoke(["eval", "--cases", str(cases), "--run", str(run), "-o", "json"], tmp_path).stdout)
    common = ["eval", "--cases", str(cases), "--run", str(run)]
    floor = invoke([*common, "--fail-under", "recall@5=nan"], tmp_path)
    assert floor.exit_code == 2 and "'nan' is not a finite number" in floor.output, floor.output
    drop = invoke([*common, "--baseline", str(baseline), "--max-drop", "NaN"], tmp_path)
    assert drop.exit_code == 2 and "Invalid value for '--max-drop'" in drop.output, drop.output
