"""The ``scheduler`` and ``probes`` config sections (docs/scheduler.md): when the periodic jobs run, what
retention keeps, and the canary permission probes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, SecretStr, field_validator, model_validator

from ragmon.monitor.config.section import ConfigSection, HttpUrlText, TimeZoneName


class SchedulerConfig(ConfigSection):
    """The periodic jobs. Exactly one process runs them: the one holding the scheduler lock (a
    PostgreSQL advisory lock, or a file lock beside a SQLite database); others wait and take over."""

    embedded: bool = Field(True, description="`ragmon serve` runs the scheduler too (it still takes the lock, so "
                           "one runner across all processes); false when a separate `ragmon scheduler` runs.")
    time_zone: TimeZoneName = Field("UTC", description="Time zone of the weekly pull and the retention time.")
    weekly_pull_day: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"] = Field(
        "mon", description="Day of the weekly pull (of the week before); a day name, since APScheduler 3 numbers "
        "weekdays from Monday = 0, unlike cron.")
    weekly_pull_time: str = Field("03:00", description="Time of the weekly pull, HH:MM.")
    weekly_pull_push: bool = Field(False, description="Also push the weekly batch to Label Studio (label_studio.*).")
    batch_dir: Path = Field(Path("ragmon-data/batches"), description="Where the weekly pull writes WEEK/ batches.")
    staleness_interval_seconds: PositiveFloat = Field(60.0, description="How often index staleness is scanned.")
    probe_interval_seconds: PositiveFloat = Field(300.0, description="How often the canary probes run.")
    retention_time: str = Field("04:00", description="Daily time of the retention job, HH:MM.")
    sample_retention_days: PositiveInt = Field(90, description="Unlabeled samples older than this are deleted.")
    dead_letter_retention_days: PositiveInt = Field(
        30, description="Dead letters in the JSONL file older than this are deleted (a Kafka topic keeps its own "
        "retention).")
    misfire_grace_seconds: PositiveInt = Field(
        3600, description="A run missed (process down, or busy) by less than this still runs once, late.")
    lock_poll_seconds: PositiveFloat = Field(5.0, description="How often a waiting scheduler tries to take the lock.")

    @field_validator("weekly_pull_time", "retention_time")
    @classmethod
    def _clock_time(cls, value: str) -> str:
        match = re.fullmatch(r"([01]\d|2[0-3]):([0-5]\d)", value)
        if match is None:
            raise ValueError(f"{value!r} is not a time of day as HH:MM")
        return value


class ProbeIdentity(ConfigSection):
    id: str = Field(description="The test user's id.")
    groups: list[str] = Field(default_factory=list, description="The test user's groups.")
    tenant: str = Field("default", description="The test user's tenant.")


class ProbeConfig(ConfigSection):
    """One canary: a query run as a test identity, with what it must and must not retrieve."""

    name: str = Field(description="Probe name (a metric label: keep it short and fixed).")
    query: str = Field(description="The query to run.")
    identity: ProbeIdentity
    index: str | None = Field(None, description="Index to query, when the endpoint serves several.")
    must_retrieve: list[str] = Field(default_factory=list, description="Document id patterns (glob) that must be "
                                     "among the results.")
    must_not_retrieve: list[str] = Field(default_factory=list, description="Document id patterns (glob) that must "
                                         "never be among the results; a hit is a leak (critical).")

    @field_validator("name")
    @classmethod
    def _label_safe(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", value):
            raise ValueError("must be 1-64 characters of letters, digits, _ . : -")
        return value


class ProbesConfig(ConfigSection):
    """Canary permission probes and the retrieval endpoint they call."""

    url: HttpUrlText | None = Field(None, description="Retrieval endpoint (HTTP POST, JSON); see docs/scheduler.md.")
    callable: str | None = Field(None, description="Instead of url: a Python callable `module:function` taking "
                                 "(query, identity, index) and returning retrieved document ids.")
    auth_header: SecretStr | None = Field(None, description="Authorization header value sent to the endpoint.")
    timeout_seconds: PositiveFloat = Field(10.0, description="Timeout of one probe request.")
    top_k: PositiveInt = Field(20, description="Results asked for per probe.")
    results_field: str = Field("passages", description="Field of the response holding the result list.")
    probes: list[ProbeConfig] = Field(default_factory=list, description="The probes, each with name, query, "
                                      "identity {id, groups, tenant}, index, must_retrieve, must_not_retrieve.")

    @field_validator("callable")
    @classmethod
    def _dotted(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+:\w+", value):
            raise ValueError("must be `module:function`")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> ProbesConfig:
        if self.url and self.callable:
            raise ValueError("set url or callable, not both")
        if self.probes and not (self.url or self.callable):
            raise ValueError("probes are configured but neither url nor callable is set")
        names = [p.name for p in self.probes]
        if len(names) != len(set(names)):
            raise ValueError("probe names must be unique")
        return self
