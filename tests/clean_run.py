"""What an uninterrupted run samples: the reference the fault tests compare a disturbed run with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: A weekly cap keeps the first samples it sees, and arrival order across partitions differs
#: between runs; comparisons across partitions use no cap.
UNCAPPED = "10000000"
# every sampled trace kept: no per-tenant and no weekly total cap
UNCAPPED_SAMPLING = {"RAGMON_SAMPLING__WEEKLY_CAP": UNCAPPED, "RAGMON_SAMPLING__WEEKLY_TOTAL_CAP": UNCAPPED}


def clean_run_samples(values: Sequence[bytes], scratch: Path, batch: int = 500, **environ: str) -> dict[str, set[str]]:
    """Feed ``values`` (encoded events) through one in-process pipeline on SQLite in ``scratch``,
    in order and in batches of ``batch``; return each sampled trace id with its strata.
    ``environ`` adds RAGMON_ settings (e.g. ``RAGMON_SAMPLING__WEEKLY_CAP``)."""
    from prometheus_client import CollectorRegistry

    from ragmon.monitor.app.wiring import build_runtime
    from ragmon.monitor.config.settings import load_settings
    from ragmon.monitor.core.records import Privilege, RawRecord
    from ragmon.monitor.labeling.sample_store import SampleStore

    scratch.mkdir(parents=True, exist_ok=True)
    settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{scratch / 'clean.db'}",
                                      "RAGMON_DEAD_LETTER__PATH": str(scratch / "clean-dead.jsonl"), **environ})
    runtime = build_runtime(settings, registry=CollectorRegistry())
    try:
        for start in range(0, len(values), batch):
            runtime.pipeline.process([RawRecord("file", value, privilege=Privilege.TRUSTED)
                                      for value in values[start:start + batch]])
        return {sample.trace_id: set(sample.strata) for sample in SampleStore(runtime.engine).find()}
    finally:
        runtime.close()


def leaks_of(samples: dict[str, set[str]]) -> set[str]:
    """The trace ids sampled as permission violations."""
    return {trace_id for trace_id, strata in samples.items() if "permission_violation" in strata}
