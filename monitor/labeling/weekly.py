"""The weekly batch, one way for everyone who pulls it: the scheduler's weekly job, ``ragmon samples
pull`` and ``push``, and the demo.

A pull takes the week's samples from the store (all tenants, or one), writes them as a batch
directory when one is given, hands them to a push when one is given (Label Studio: see
``ragmon.exporters.label_studio.push_batch``), and only then marks them exported. A push that
fails raises and nothing is marked, so the next pull offers the same samples again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmon.monitor.labeling.batch import write_batch
from ragmon.monitor.labeling.sample_store import SampleStore

Push = Callable[[Sequence[Any]], int]  # the batch -> cases sent; raises when it could not send them


@dataclass(frozen=True, slots=True)
class WeeklyPull:
    """What one pull did."""

    week: str
    tenant: str | None
    cases: int
    exported: int  # queued samples that became exported
    pushed: int  # cases the push sent (0 without a push)
    directory: Path | None


def pull_week(store: SampleStore, week: str, *, tenant: str | Sequence[str] | None = None,
              directory: Path | None = None, push: Push | None = None) -> WeeklyPull:
    """Pull ``week`` (ISO ``YYYY-Www``): write it to ``directory``, push it, mark it exported.
    Pulling the same week again gives the same batch."""
    batch = store.batch(week, tenant)
    if directory is not None:
        write_batch(batch, directory)
    pushed = push(batch) if push is not None and batch else 0
    exported = store.mark_exported([sample.trace_id for sample in batch])
    shown = tenant if tenant is None or isinstance(tenant, str) else tenant[0]  # its stored values, newest first
    return WeeklyPull(week, shown, len(batch), exported, pushed, directory)
