"""Explaining the OTLP traces ragmon cannot read (docs/events.md, "Traces ragmon cannot read"):
each assembled trace is counted by its instrumentation scope as read or not (``watch``); one that
yields no retrieval, or is read without a caller or a context, is also kept as a bounded, redacted
digest (``digest``) naming the closest dialect and what it lacked (``closest``). Names a sender
chose (scopes, spans, attribute keys) are shown as every surface shows an id (``names``)."""
