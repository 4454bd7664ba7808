"""A stand-in for one Pinecone index's data-plane REST API, on a local port: Pinecone is a hosted
service, out of reach of the tests. It answers the two calls the app makes, in the JSON shapes of
Pinecone's documented REST API (``X-Pinecone-Api-Version: 2025-10``, the version pinecone 8.1.2
sends):

- ``POST /vectors/upsert`` ``{"vectors": [{"id", "values", "metadata"}], "namespace"}`` →
  ``{"upsertedCount"}``;
- ``POST /query`` ``{"vector", "topK", "namespace", "filter", "includeValues", "includeMetadata"}`` →
  ``{"matches": [{"id", "score", "values", "metadata"}], "namespace", "usage": {"readUnits"}}``,
  scored as a cosine index scores (the similarity, highest first).

Filters: ``{"field": {"$eq": value}}``, ``{"field": {"$in": [values]}}`` and ``{"field": value}``
only; anything else is answered 400 naming it, as is any other path. The Pinecone client and its
instrumentation talk to it as they would to Pinecone: only the server is not Pinecone's."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Vectors = dict[str, dict[str, tuple[list[float], dict[str, Any]]]]  # namespace -> id -> (values, metadata)


class BadRequest(ValueError):
    """A request this stand-in does not answer (Pinecone answers 400 with ``{"code", "message"}``)."""


def _cosine(a: list[float], b: list[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


def _passes(metadata: dict[str, Any], filter_: dict[str, Any]) -> bool:
    for field, condition in filter_.items():
        if not isinstance(condition, dict):
            condition = {"$eq": condition}
        for operator, operand in condition.items():
            if operator == "$eq":
                if metadata.get(field) != operand:
                    return False
            elif operator == "$in" and isinstance(operand, list):
                if metadata.get(field) not in operand:
                    return False
            else:
                raise BadRequest(f"filter operator {operator!r} on {field!r} is not served by this stand-in")
    return True


def upsert(vectors: Vectors, body: dict[str, Any]) -> dict[str, Any]:
    namespace = vectors.setdefault(body.get("namespace", ""), {})
    for vector in body["vectors"]:
        namespace[vector["id"]] = (vector["values"], vector.get("metadata") or {})
    return {"upsertedCount": len(body["vectors"])}


def query(vectors: Vectors, body: dict[str, Any]) -> dict[str, Any]:
    if "vector" not in body:
        raise BadRequest("only a query by vector is served by this stand-in")
    namespace = body.get("namespace", "")
    scored = sorted(((_cosine(body["vector"], values), id_, values, metadata)
                     for id_, (values, metadata) in vectors.get(namespace, {}).items()
                     if _passes(metadata, body.get("filter") or {})), key=lambda match: -match[0])
    matches = []
    for score, id_, values, metadata in scored[:body["topK"]]:
        match = {"id": id_, "score": score, "values": values if body.get("includeValues") else []}
        if body.get("includeMetadata"):
            match["metadata"] = metadata
        matches.append(match)
    return {"results": [], "matches": matches, "namespace": namespace, "usage": {"readUnits": 1}}


class StandIn:
    """The stand-in, serving on ``127.0.0.1`` from a thread of its own until :meth:`close`."""

    def __init__(self) -> None:
        vectors: Vectors = {}
        routes = {"/vectors/upsert": upsert, "/query": query}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                try:
                    route = routes.get(self.path)
                    if route is None:
                        raise BadRequest(f"{self.path} is not served by this stand-in")
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    status, answer = 200, route(vectors, body)
                except (BadRequest, KeyError, TypeError, ValueError) as e:
                    status, answer = 400, {"code": 3, "message": str(e)}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
                pass  # the app's stdout is its report

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
