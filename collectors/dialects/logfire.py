"""Logfire (pydantic): ``logfire.span``, ``@logfire.instrument`` and the instrumentations Logfire wraps.

Logfire's own spans (instrumentation scope ``logfire``) have no retrieval convention: the lists of a
Logfire application come from the instrumentations it runs (OpenInference's for LlamaIndex and DSPy,
OpenLLMetry's) or from OTel GenAI attributes the application sets on a ``logfire.span``, each read by
its own dialect. What is Logfire's:

- ``@logfire.instrument`` records the function's arguments as attributes by parameter name
  (``question``, ``query``, ...) and, with ``record_return=True``, its result as ``return``; a
  ``logfire.span`` takes its keyword arguments likewise. Structured values are JSON text.
- ``logfire.set_baggage(...)`` copies its keys onto every span opened inside it: the application's
  ``user.id``, ``metadata`` (JSON text) and ``ragmon.caller.groups`` reach every span so.
- Logfire scrubs attribute values whose key or value looks sensitive, ``session.id`` among them
  (``session``), replacing the value with ``[Scrubbed due to '<match>']`` and listing the path in
  ``logfire.scrubbed``. A scrubbed value is not the value: :func:`drop_scrubbed` removes it as the
  span arrives, whatever its dialect (else one constant would be every trace's conversation).
  ``gen_ai.conversation.id`` is not scrubbed.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ragmon.collectors.dialects.base import ANSWER_KEYS, QUERY_KEYS, Dialect, first_text
from ragmon.collectors.semconv import parse_json_text

SCOPE = "logfire"
SPAN_TYPE, SCRUBBED, RETURN = "logfire.span_type", "logfire.scrubbed", "return"
SCRUBBED_PREFIX = "[Scrubbed due to "
MAX_SCRUBBED_PATHS = 64  # the list is the sender's: bounded


def drop_scrubbed(attributes: dict[str, Any]) -> None:
    """Removes the values ``logfire.scrubbed`` lists (``{"path": ["attributes", key, ...]}``) from a
    span's attributes, in place: a top-level attribute goes; a key inside a JSON object attribute
    goes from that object (left parsed). Asked only of a span that carries ``logfire.scrubbed``."""
    listed = parse_json_text(attributes.get(SCRUBBED))
    for entry in listed[:MAX_SCRUBBED_PATHS] if isinstance(listed, list) else []:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, list) or len(path) < 2 or path[0] != "attributes" or not isinstance(path[1], str):
            continue
        key, inner = path[1], path[2:]
        if not inner:
            if _is_scrubbed(attributes.get(key)):
                del attributes[key]
            continue
        value = attributes.get(key)
        holder = parse_json_text(value) if isinstance(value, str) else value
        if not isinstance(holder, dict):
            continue
        outer, node = holder, holder
        for step in inner[:-1]:
            node = node.get(step) if isinstance(node, dict) and isinstance(step, str) else None
        if isinstance(node, dict) and isinstance(inner[-1], str) and _is_scrubbed(node.get(inner[-1])):
            del node[inner[-1]]
            attributes[key] = outer


def _is_scrubbed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(SCRUBBED_PREFIX)


class Logfire(Dialect):
    name = "logfire"
    scopes: ClassVar[tuple[str, ...]] = (SCOPE,)

    def is_chain(self, span: Any) -> bool:
        return span.attributes.get(SPAN_TYPE) == "span"

    def root_question(self, span: Any) -> str | None:
        """An argument named like a question (``question``, ``query``, ``query_str``, ``input``)."""
        return first_text(span.attributes, QUERY_KEYS)

    def root_answer(self, span: Any) -> str | None:
        """The recorded result (``record_return=True``): text as it is; an object (JSON text) by
        its ``answer``, ``response`` or ``output``; a list is no answer."""
        value = span.attributes.get(RETURN)
        if not isinstance(value, str) or not value:
            return None
        if value[0] == "{":
            parsed = parse_json_text(value)
            return first_text(parsed, ANSWER_KEYS) if isinstance(parsed, dict) else value
        return None if value[0] == "[" and parse_json_text(value) is not None else value

    def lacks(self, spans: list[Any]) -> tuple[str, ...]:
        return ("Logfire's own spans list no documents: a span of an instrumentation it runs (OpenInference, "
                "OpenLLMetry) or with gen_ai.operation.name retrieval",)
