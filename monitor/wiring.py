"""The one place that names concrete classes and joins them; everything else receives its parts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from collectors.files import JsonlDeadLetterSink
from monitor.config import Settings
from monitor.decode import Decoder
from monitor.pipeline import Pipeline, Sink


def build_pipeline(
    settings: Settings,
    sinks: Sequence[Sink] = (),
    clock: Callable[[], float] = time.time,
) -> Pipeline:
    """The embedded-mode pipeline: decoder with the configured limits, the given sinks, and the
    JSONL dead-letter file."""
    dead_letters = JsonlDeadLetterSink(
        settings.dead_letter.path, settings.dead_letter.max_raw_bytes, clock=clock
    )
    return Pipeline(Decoder(settings.limits, clock), sinks, dead_letters, clock)
