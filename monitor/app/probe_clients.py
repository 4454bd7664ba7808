"""How canary probes reach the RAG system's retrieval: an HTTP JSON endpoint, or a Python callable.

The HTTP contract: ``POST url`` with ``{"query", "identity": {"id", "groups", "tenant"}, "index",
"top_k"}``; the answer is a JSON object whose ``results_field`` (default ``passages``) lists the
results in rank order, each with a ``doc_id`` (or an ``id``). Every failure becomes a
:class:`~ragmon.monitor.app.probes.ProbeError` naming what went wrong, never an exception that ends the job.
"""

from __future__ import annotations

import importlib
from typing import Any

import httpx

from ragmon.monitor.app.probes import ProbeError, Retrieve
from ragmon.monitor.config.scheduling import ProbeConfig, ProbesConfig


class HttpRetrieval:
    def __init__(self, config: ProbesConfig, transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": config.auth_header.get_secret_value()} if config.auth_header else {}
        self._url = config.url
        self._top_k = config.top_k
        self._field = config.results_field
        self._http = httpx.Client(timeout=config.timeout_seconds, headers=headers, transport=transport)

    def __call__(self, probe: ProbeConfig) -> list[str]:
        body = {"query": probe.query, "identity": probe.identity.model_dump(), "index": probe.index,
                "top_k": self._top_k}
        try:
            response = self._http.post(self._url, json=body)
        except httpx.TimeoutException:
            raise ProbeError(f"retrieval endpoint did not answer within {self._http.timeout.read} s") from None
        except httpx.HTTPError as error:
            raise ProbeError(f"retrieval endpoint unreachable: {type(error).__name__}") from None
        if response.is_error:
            raise ProbeError(f"retrieval endpoint answered HTTP {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            raise ProbeError("retrieval endpoint answered with something that is not JSON") from None
        results = answer.get(self._field) if isinstance(answer, dict) else None
        if not isinstance(results, list):
            raise ProbeError(f"retrieval endpoint's answer has no `{self._field}` list")
        return [_doc_id(item, number) for number, item in enumerate(results)]

    def close(self) -> None:
        self._http.close()


def _doc_id(item: Any, number: int) -> str:
    if isinstance(item, dict):
        value = item.get("doc_id", item.get("id"))
        if isinstance(value, str):
            return value
    raise ProbeError(f"result {number} has no string `doc_id` or `id`")


def callable_retrieval(dotted: str) -> Retrieve:
    """``module:function``, called as ``function(query, identity, index)`` returning document ids."""
    module_name, _, name = dotted.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ProbeError(f"probes.callable {dotted!r} cannot be loaded: {error}") from None

    def retrieve(probe: ProbeConfig) -> list[str]:
        try:
            doc_ids = function(probe.query, probe.identity.model_dump(), probe.index)
        except Exception as error:  # the callable is the user's code: any failure is this probe's error
            # the type only: the message could quote the probe's query
            raise ProbeError(f"probes.callable raised {type(error).__name__}") from None
        if not isinstance(doc_ids, list | tuple) or not all(isinstance(d, str) for d in doc_ids):
            raise ProbeError("probes.callable must return a list of document id strings")
        return list(doc_ids)

    return retrieve


def build_retrieval(config: ProbesConfig) -> Retrieve | None:
    if config.url:
        return HttpRetrieval(config)
    if config.callable:
        return callable_retrieval(config.callable)
    return None
