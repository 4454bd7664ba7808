"""The pipeline's side of the direct push: a sink that reports leaks at context to the dispatcher.
It runs after the batch is durable, like the metrics, and does nothing slow: delivery happens on
the dispatcher's thread."""

from __future__ import annotations

from ragmon.alerts.dispatch import AlertDispatcher
from ragmon.monitor.core.model import TraceEvent
from ragmon.monitor.core.pipeline import Observation


class AlertSink:
    name = "alerts"
    durable = False

    def __init__(self, dispatcher: AlertDispatcher) -> None:
        self.dispatcher = dispatcher

    def consume(self, observation: Observation) -> None:
        event, signals = observation.event, observation.signals
        if not isinstance(event, TraceEvent) or signals is None or not signals.access.context:
            return
        self.dispatcher.leak(event.tenant, event.index.name, signals.access.context, event.trace_id,
                             signals.access.context_doc_ids, observation.received_at)

    def flush(self, timeout: float) -> bool:
        return True

    def shutdown(self) -> None:
        self.dispatcher.shutdown()
