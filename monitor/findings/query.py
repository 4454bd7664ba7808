"""What a reader asks the findings store for, from the words people type: ``GET
/api/v1/findings?signal=&tenant=&index=&trace_id=&since=&limit=&cursor=`` and ``ragmon findings
list`` take the same parameters, checked here, each error naming the parameter.

Numbers are read strictly: a whole number is ASCII digits and nothing else (Python's ``int`` also
takes ``١٢``, ``+5``, `` 5`` and ``5_000``), within the range of a database BIGINT; a time is a
finite number of seconds between 1970 and the year 9999 (``float`` also takes ``nan``, ``inf`` and
a 400-digit number that becomes ``inf``). A value out of range is the reader's mistake (400), not
the database's (a 500 with an ``OverflowError``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from ragmon.monitor.core.signals.explain import FindingSignal
from ragmon.monitor.findings.store import FindingQuery

MAX_LIMIT = 1000
MAX_BIGINT = 2**63 - 1  # the largest id SQLite and PostgreSQL can compare with
LATEST_TIME = 253402300799.0  # 9999-12-31T23:59:59Z: what an ISO-8601 time can name
PARAMETERS = ("signal", "tenant", "index", "trace_id", "since", "limit", "cursor")
_WHOLE = re.compile(r"[0-9]+", re.ASCII)
_SECONDS_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])", re.ASCII)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class QueryError(ValueError):
    """A parameter a reader gave is not usable; the message names it."""


def parse_since(text: str, now: float) -> float:
    """Unix seconds from ``24h``, ``30m``, ``7d`` (that long before ``now``), an ISO-8601 time
    (UTC unless it names a zone), or Unix seconds; raises :class:`QueryError` for anything else
    and for a time before 1970 or after the year 9999."""
    text = text.strip()
    if not text.isascii():
        raise QueryError(f"since: {text!r} holds characters other than ASCII (write digits as 0-9)")
    if (duration := _DURATION.fullmatch(text)) is not None:
        moment = now - float(duration.group(1)) * _SECONDS[duration.group(2)]
    elif _SECONDS_TEXT.fullmatch(text) is not None:
        moment = float(text)
    else:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            moment = (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError):
            raise QueryError(f"since: {text!r} is neither a duration (30m, 24h, 7d), an ISO-8601 time nor Unix "
                             "seconds") from None
    if not math.isfinite(moment) or not 0 <= moment <= LATEST_TIME:
        raise QueryError(f"since: {text!r} is not a time between 1970 and the year 9999")
    return moment


def query_from(params: Mapping[str, str], now: float) -> FindingQuery:
    """The query the parameters describe. Unknown parameters are refused (a typo would
    otherwise widen the answer silently)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise QueryError(f"{unknown[0]}: unknown parameter (known: {', '.join(PARAMETERS)})")
    signal = params.get("signal") or None
    if signal is not None and signal not in {s.value for s in FindingSignal}:
        raise QueryError(f"signal: {signal!r} is not one of {', '.join(s.value for s in FindingSignal)}")
    limit = whole_number(params, "limit", 50)
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit: {limit} is not between 1 and {MAX_LIMIT}")
    cursor = whole_number(params, "cursor", None)
    since = params.get("since") or None
    return FindingQuery(signal=signal, tenant=params.get("tenant") or None, index=params.get("index") or None,
                        trace_id=params.get("trace_id") or None,
                        since=parse_since(since, now) if since is not None else None, limit=limit, cursor=cursor)


def whole_number(params: Mapping[str, str], name: str, default: int | None) -> int | None:
    """Parameter ``name`` as a whole number of ASCII digits at most :data:`MAX_BIGINT`, or
    ``default`` when it is absent or empty."""
    value = params.get(name)
    if not value:
        return default
    if _WHOLE.fullmatch(value) is None:
        raise QueryError(f"{name}: {value[:40]!r} is not a whole number (ASCII digits 0-9 only)")
    if len(value.lstrip("0")) > len(str(MAX_BIGINT)) or int(value) > MAX_BIGINT:
        raise QueryError(f"{name}: {value[:40]!r} is larger than {MAX_BIGINT}")
    return int(value)
