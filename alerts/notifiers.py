"""Where pushed alerts go: Alertmanager's API v2 and a JSON webhook.

A notifier sends a list of alerts in one request and raises :class:`NotifyError` when the target
did not take them; the dispatcher keeps them and retries with back-off. Payloads carry exactly
what :class:`~ragmon.alerts.state.PushedAlert` holds: labels, counts, up to 10 trace and document ids,
runbook and dashboard links.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from ragmon.alerts.state import PushedAlert


class NotifyError(Exception):
    """The target did not accept the alerts (unreachable, timed out, or an error status)."""


class Notifier(Protocol):
    name: str
    repeat_seconds: float  # a firing alert is sent again after this long

    def send(self, alerts: Sequence[PushedAlert], now: float) -> None: ...

    def close(self) -> None: ...


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def annotations(alert: PushedAlert) -> dict[str, str]:
    """The alert's annotations: text from the rule, then the evidence, all as strings."""
    out = {"summary": alert.summary, "description": alert.description, "runbook_url": alert.runbook_url,
           "count": str(alert.count)}
    if alert.dashboard_url:
        out["dashboard_url"] = alert.dashboard_url
    if alert.trace_ids:
        out["trace_ids"] = ",".join(alert.trace_ids)
    if alert.doc_ids:
        out["doc_ids"] = ",".join(alert.doc_ids)
    out.update(alert.figures)
    out.update(alert.links)
    return out


class _HttpNotifier:
    def __init__(self, name: str, url: str, timeout: float, repeat_seconds: float,
                 headers: dict[str, str] | None = None, transport: httpx.BaseTransport | None = None) -> None:
        self.name = name
        self.url = url
        self.repeat_seconds = repeat_seconds
        self._http = httpx.Client(timeout=timeout, headers=headers or {}, transport=transport)

    def _post(self, body: Any) -> None:
        try:
            response = self._http.post(self.url, json=body)
        except httpx.HTTPError as error:
            raise NotifyError(f"{self.name}: {type(error).__name__}") from None
        if response.is_error:
            raise NotifyError(f"{self.name}: HTTP {response.status_code}")

    def close(self) -> None:
        self._http.close()


class AlertmanagerNotifier(_HttpNotifier):
    """``POST /api/v2/alerts``. A firing alert gets an ``endsAt`` a few resend intervals ahead,
    so Alertmanager resolves it by itself if ragmon stops; a resolved one gets its real end."""

    def __init__(self, base_url: str, timeout: float, resend_seconds: float,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__("alertmanager", base_url.rstrip("/") + "/api/v2/alerts", timeout, resend_seconds,
                         transport=transport)

    def send(self, alerts: Sequence[PushedAlert], now: float) -> None:
        self._post([self.payload(alert, now) for alert in alerts])

    def payload(self, alert: PushedAlert, now: float) -> dict[str, Any]:
        ends = alert.ends_at if alert.ends_at is not None else now + 4 * self.repeat_seconds
        body = {"labels": alert.label_map, "annotations": annotations(alert),
                "startsAt": rfc3339(alert.starts_at), "endsAt": rfc3339(ends)}
        if alert.dashboard_url:
            body["generatorURL"] = alert.dashboard_url
        return body


class WebhookNotifier(_HttpNotifier):
    """A JSON POST shaped like Alertmanager's webhook body (``status``, ``alerts`` with
    ``fingerprint``), so a receiver written for one takes the other."""

    def __init__(self, url: str, timeout: float, repeat_seconds: float, token: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        super().__init__("webhook", url, timeout, repeat_seconds, headers=headers, transport=transport)

    def send(self, alerts: Sequence[PushedAlert], now: float) -> None:
        self._post(self.payload(alerts))

    @staticmethod
    def payload(alerts: Sequence[PushedAlert]) -> dict[str, Any]:
        return {
            "version": "1", "receiver": "ragmon",
            "status": "firing" if any(not a.resolved for a in alerts) else "resolved",
            "alerts": [{"status": "resolved" if a.resolved else "firing", "fingerprint": a.fingerprint,
                        "labels": a.label_map, "annotations": annotations(a), "startsAt": rfc3339(a.starts_at),
                        "endsAt": rfc3339(a.ends_at) if a.ends_at is not None else "0001-01-01T00:00:00Z"}
                       for a in alerts],
        }
