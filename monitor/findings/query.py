"""What a reader asks the findings store for, from the words people type: ``GET
/api/v1/findings?signal=&tenant=&index=&since=&limit=&cursor=`` and ``ragmon findings list``
take the same parameters, checked here, each error naming the parameter."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from ragmon.monitor.core.signals.explain import FindingSignal
from ragmon.monitor.findings.store import FindingQuery

MAX_LIMIT = 1000
PARAMETERS = ("signal", "tenant", "index", "since", "limit", "cursor")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class QueryError(ValueError):
    """A parameter a reader gave is not usable; the message names it."""


def parse_since(text: str, now: float) -> float:
    """Unix seconds from ``24h``, ``30m``, ``7d`` (that long before ``now``), an ISO-8601 time
    (UTC unless it names a zone), or Unix seconds."""
    text = text.strip()
    if (duration := _DURATION.fullmatch(text)) is not None:
        return now - float(duration.group(1)) * _SECONDS[duration.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(f"since: {text!r} is neither a duration (30m, 24h, 7d), an ISO-8601 time nor Unix "
                         "seconds") from None
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def query_from(params: Mapping[str, str], now: float) -> FindingQuery:
    """The query the parameters describe. Unknown parameters are refused (a typo would
    otherwise widen the answer silently)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise QueryError(f"{unknown[0]}: unknown parameter (known: {', '.join(PARAMETERS)})")
    signal = params.get("signal") or None
    if signal is not None and signal not in {s.value for s in FindingSignal}:
        raise QueryError(f"signal: {signal!r} is not one of {', '.join(s.value for s in FindingSignal)}")
    limit = _integer(params, "limit", 50)
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit: {limit} is not between 1 and {MAX_LIMIT}")
    cursor = _integer(params, "cursor", None)
    since = params.get("since") or None
    return FindingQuery(signal=signal, tenant=params.get("tenant") or None, index=params.get("index") or None,
                        since=parse_since(since, now) if since is not None else None, limit=limit, cursor=cursor)


def _integer(params: Mapping[str, str], name: str, default: int | None) -> int | None:
    value = params.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise QueryError(f"{name}: {value!r} is not a whole number") from None
