"""Configuration: one YAML file plus ``RAGMON_`` environment overrides.

Precedence, highest first: environment (``RAGMON_SECTION__KEY``), the YAML file, defaults.
Every section forbids unknown keys, so a typo is an error that names the key instead of a
setting silently left at its default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, SecretStr, ValidationError

ENV_PREFIX = "RAGMON_"
ENV_CONFIG_FILE = "RAGMON_CONFIG"  # path of the YAML file, when --config is not given
MASK = "****"


class ConfigError(Exception):
    """The configuration is unusable; the message names the key and what is wrong."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Limits(_Section):
    """Bounds on a single input record (SPEC §8). Exceeding one rejects the record."""

    max_event_bytes: PositiveInt = Field(1024 * 1024, description="Largest accepted record, in bytes.")
    max_passages_per_list: PositiveInt = Field(
        500, description="Most passages in one retrieval list or context (also ACL entries, groups, citations)."
    )
    max_retrieval_lists: PositiveInt = Field(32, description="Most retrieval lists in one trace.")
    max_id_length: PositiveInt = Field(256, description="Longest id, name, version or principal, in characters.")
    max_text_length: PositiveInt = Field(
        65536, description="Longest query, answer, passage text or comment, in characters."
    )
    max_clock_skew_seconds: PositiveFloat = Field(
        300.0, description="How far in the future a timestamp may be before the record is rejected."
    )


class DeadLetterConfig(_Section):
    """Where rejected records go in embedded mode (a JSONL file)."""

    path: Path = Field(Path("ragmon-data/dead-letters.jsonl"), description="JSONL file of rejected records.")
    max_raw_bytes: PositiveInt = Field(
        65536, description="Raw bytes kept per rejected record; longer records are truncated and flagged."
    )


class DatabaseConfig(_Section):
    """The SQL store (catalog, samples, batches, alert state)."""

    url: str = Field(
        "sqlite:///ragmon-data/ragmon.db",
        description="SQLAlchemy URL: sqlite:///FILE or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB.",
    )


class LogConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")
    format: Literal["text", "json"] = Field("text", description="Log line format.")


class Settings(_Section):
    """The whole effective configuration. Build it with :func:`load_settings`."""

    limits: Limits = Limits()
    dead_letter: DeadLetterConfig = DeadLetterConfig()
    database: DatabaseConfig = DatabaseConfig()
    log: LogConfig = LogConfig()


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the YAML file (``path``, else ``$RAGMON_CONFIG``, else none) and apply the environment.

    ``RAGMON_SECTION__KEY=value`` overrides ``section: {key: value}``; values that look like JSON
    lists or objects are parsed as JSON. Raises :class:`ConfigError` naming the offending key.
    """
    environ = os.environ if environ is None else environ
    if path is None and environ.get(ENV_CONFIG_FILE):
        path = Path(environ[ENV_CONFIG_FILE])
    data = _read_yaml(path) if path is not None else {}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and name != ENV_CONFIG_FILE:
            _set_path(data, name, value)
    try:
        return Settings.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error, path)) from None


def _set_path(data: dict[str, Any], name: str, value: str) -> None:
    keys = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
    if not all(keys):
        raise ConfigError(f"environment variable {name}: empty key (use SECTION__KEY)")
    node = data
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"environment variable {name}: `{key}` is not a section")
        node = child
    if value[:1] in "[{":
        try:
            node[keys[-1]] = json.loads(value)
            return
        except json.JSONDecodeError:
            raise ConfigError(f"environment variable {name}: not valid JSON") from None
    node[keys[-1]] = value


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
        else:
            lines.append(f"{key}: {problem['msg']}")
    origin = f" (file {path} and RAGMON_ environment)" if path else " (RAGMON_ environment)"
    return "invalid configuration" + origin + ":\n  " + "\n  ".join(lines)


def effective_config(settings: Settings) -> dict[str, Any]:
    """The configuration as plain data with every secret masked, for display."""
    data = settings.model_dump(mode="python")
    _mask_secrets(settings, data)
    data["database"]["url"] = mask_url(settings.database.url)
    return _plain(data)


def mask_url(url: str) -> str:
    """Hide the password of a URL, keeping the rest readable."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def _mask_secrets(model: BaseModel, data: dict[str, Any]) -> None:
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            data[name] = MASK if value.get_secret_value() else ""
        elif isinstance(value, BaseModel):
            _mask_secrets(value, data[name])


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
