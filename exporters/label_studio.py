"""A small client for the parts of Label Studio's REST API the labeling loop uses: find or create
the project with ragmon's labeling config, import tasks once each, and fetch the export.

Two kinds of token work:

- a **personal access token** (a JWT refresh token, shown once under Account & Settings). It is
  exchanged at ``/api/token/refresh/`` for a short-lived access token sent as ``Bearer``; the
  access token is renewed when it expires.
- a **legacy API token** (``Authorization: Token ...``). Label Studio 1.18 and later turn these off
  per organization by default; an administrator can turn them back on (Organization → API Tokens
  Settings). A legacy token refused for that reason gets an error that says so.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ragmon.monitor.labeling.batch import LABEL_CONFIG, task_of

LEGACY_DISABLED_HINT = (
    "Label Studio refused the legacy API token: this organization has legacy tokens disabled "
    "(the default since Label Studio 1.18). Use a personal access token (Account & Settings → "
    "Personal Access Token) as label_studio.token, or have an administrator enable legacy tokens."
)
IMPORT_CHUNK = 200  # tasks per import request, to keep request bodies moderate


class LabelStudioError(Exception):
    """Label Studio could not be reached or refused a request; the message says which request."""


def is_personal_access_token(token: str) -> bool:
    """A personal access token is a JWT whose payload says ``token_type: refresh``."""
    parts = token.split(".")
    if len(parts) != 3:
        return False
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("token_type") == "refresh"


class LabelStudio:
    """One Label Studio instance. Methods raise :class:`LabelStudioError` with the request and the
    status (and Label Studio's own explanation, which is about config or data shape)."""

    def __init__(self, url: str, token: str, timeout: float = 30.0, transport: httpx.BaseTransport | None = None):
        self._token = token
        self._personal = is_personal_access_token(token)
        self._access: str | None = None
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LabelStudio:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- projects ------------------------------------------------------------------------------

    def ensure_project(self, title: str, label_config: str) -> tuple[int, bool]:
        """The id of the project titled ``title`` (created if missing) and whether it was created.
        An existing project whose labeling config differs gets ragmon's config; Label Studio
        refuses that when existing annotations would no longer fit, and the error says so."""
        found = self.find_project(title)
        if found is None:
            created = self._request("POST", "/api/projects", json={
                "title": title, "label_config": label_config,
                "description": "Weekly regression batches sampled from production by ragmon."})
            return created["id"], True
        if found.get("label_config", "").strip() != label_config.strip():
            self._request("PATCH", f"/api/projects/{found['id']}", json={"label_config": label_config})
        return found["id"], False

    def find_project(self, title: str) -> dict[str, Any] | None:
        """The project with exactly this title, or None."""
        page = 1
        while True:
            listing = self._request("GET", "/api/projects", params={"title": title, "page": page, "page_size": 100})
            for project in listing.get("results", []):
                if project.get("title") == title:
                    return project
            if not listing.get("next"):
                return None
            page += 1

    # -- tasks ---------------------------------------------------------------------------------

    def export(self, project_id: int) -> list[dict[str, Any]]:
        """Every task of the project with its annotations (Label Studio's JSON export)."""
        return self._request("GET", f"/api/projects/{project_id}/export",
                             params={"exportType": "JSON", "download_all_tasks": "true"})

    def import_tasks(self, project_id: int, tasks: Sequence[dict[str, Any]], key: str = "case_id") -> int:
        """Import the tasks whose ``data[key]`` is not in the project yet; returns how many were
        imported. Label Studio checks each task against the labeling config and refuses the
        request when one does not fit."""
        present = {task.get("data", {}).get(key) for task in self.export(project_id)}
        new = [task for task in tasks if task["data"][key] not in present]
        for chunk in _chunks(new, IMPORT_CHUNK):
            self._request("POST", f"/api/projects/{project_id}/import", json=chunk)
        return len(new)

    # -- transport -----------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs) -> Any:
        response = self._send(method, path, **kwargs)
        if response.status_code == 401 and self._personal:
            self._access = None  # the access token expired: renew once and retry
            response = self._send(method, path, **kwargs)
        if response.is_error:
            raise LabelStudioError(f"{method} {path}: {self._explain(response)}")
        return response.json() if response.content else None

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            return self._http.request(method, path, headers={"Authorization": self._authorization()}, **kwargs)
        except httpx.HTTPError as error:
            raise LabelStudioError(f"{method} {path}: {type(error).__name__}: {error}") from None

    def _authorization(self) -> str:
        if not self._personal:
            return f"Token {self._token}"
        if self._access is None:
            try:
                response = self._http.post("/api/token/refresh/", json={"refresh": self._token})
            except httpx.HTTPError as error:
                raise LabelStudioError(f"POST /api/token/refresh/: {type(error).__name__}: {error}") from None
            if response.is_error:
                raise LabelStudioError("the personal access token was refused "
                                       f"(POST /api/token/refresh/: {self._explain(response)})")
            self._access = response.json()["access"]
        return f"Bearer {self._access}"

    def _explain(self, response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            body = {}
        detail = body.get("detail") if isinstance(body, dict) else None
        if response.status_code == 401 and not self._personal and detail and "legacy" in detail:
            return f"HTTP 401: {LEGACY_DISABLED_HINT}"
        parts = [f"HTTP {response.status_code}"]
        if detail:
            parts.append(str(detail))
        problems = body.get("validation_errors") if isinstance(body, dict) else None
        if problems:
            parts.append(_short(json.dumps(problems)))
        return ": ".join(parts)


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@dataclass(frozen=True, slots=True)
class Pushed:
    """What a push of a weekly batch did."""

    project_id: int
    created: bool  # the project did not exist and was made
    imported: int  # tasks new to the project (a case already there is not imported again)


def push_batch(studio: LabelStudio, title: str, batch: Sequence) -> Pushed:
    """The one way a weekly batch reaches Label Studio (the scheduler's job and ``ragmon samples
    push``): the project titled ``title`` with ragmon's labeling config (created when missing),
    then each case of ``batch`` imported once."""
    project_id, created = studio.ensure_project(title, LABEL_CONFIG)
    return Pushed(project_id, created, studio.import_tasks(project_id, [task_of(sample) for sample in batch]))
