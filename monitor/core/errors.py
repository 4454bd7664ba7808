"""The two kinds of failure that drive acknowledgement, retries and status codes everywhere.

- :class:`InvalidInput` is permanent: the record is wrong and will stay wrong. It goes to the
  dead-letter sink with a closed-enum :class:`Reason`, is counted, and is then acknowledged so it
  never blocks what follows it.
- :class:`Retryable` is transient: something we depend on (database, dead-letter store, disk) is
  not available. Nothing is acknowledged; the source backs off and tries the same batch again.

Anything else raised inside one sink is a bug in that sink: the fan-out counts and logs it and the
other sinks carry on.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a record was rejected. A closed set: it is a metric label and a dead-letter field."""

    MALFORMED_JSON = "malformed_json"  # not JSON, truncated, invalid UTF-8, NaN literals
    NOT_AN_OBJECT = "not_an_object"  # valid JSON, but not an object
    UNKNOWN_TYPE = "unknown_type"  # `type` names no event kind we know
    MISSING_FIELD = "missing_field"  # a required field is absent
    WRONG_TYPE = "wrong_type"  # a field holds the wrong JSON type
    INVALID_VALUE = "invalid_value"  # right type, impossible value (enum, span order, NaN score)
    BAD_TIMESTAMP = "bad_timestamp"  # not RFC 3339 with an offset, nor finite Unix seconds
    FUTURE_TIMESTAMP = "future_timestamp"  # later than now plus the allowed clock skew
    TOO_LARGE = "too_large"  # the raw record exceeds the size limit
    TOO_MANY_PASSAGES = "too_many_passages"  # a passage list or the list of lists is too long
    TOO_LONG = "too_long"  # an id or a text exceeds its length limit
    NOT_PERMITTED = "not_permitted"  # a catalog event from a sender without the catalog privilege
    CATALOG_FULL = "catalog_full"  # a new document or index entry beyond catalog.max_documents / max_index_entries


class InvalidInput(Exception):
    """A record that can never be processed. Permanent: dead-letter it, count it, acknowledge it.

    ``detail`` names the offending field (as a JSON path such as ``$.retrievals[0].passages``)
    and what was wrong, and never quotes the field's content: details end up in logs.
    """

    def __init__(self, reason: Reason, detail: str, field: str | None = None) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.field = field


class Retryable(Exception):
    """A dependency is unavailable; the same work may succeed later. Do not acknowledge."""
