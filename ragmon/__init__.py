"""ragmon: a production monitor for retrieval-augmented generation.

This package is the public API for RAG applications: the emitter, which describes each answered
question as a ragmon trace event and hands it to a transport (Kafka, or OpenTelemetry spans in
OpenInference shape). It needs only the base install (``pip install ragmon``)::

    from ragmon import Emitter, OpenInferenceTransport

    emitter = Emitter(OpenInferenceTransport(tracer_provider))
    trace = emitter.start_trace("How many days carry over?", caller="u-123", groups=["staff"])
    ...

The monitor itself lives in the sub-packages ``ragmon.monitor`` (core, labeling, storage, config,
app), ``ragmon.collectors``, ``ragmon.exporters`` and ``ragmon.alerts``, installed with
``pip install "ragmon[server]"``; see docs/design.md for the map.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ragmon.collectors.emitter import (
    Emitter,
    KafkaTransport,
    ListTransport,
    OpenInferenceTransport,
    TraceBuilder,
    Transport,
)
from ragmon.monitor.core.model import partition_key

try:
    __version__ = version("ragmon")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Emitter", "KafkaTransport", "ListTransport", "OpenInferenceTransport", "TraceBuilder", "Transport",
           "__version__", "partition_key"]
