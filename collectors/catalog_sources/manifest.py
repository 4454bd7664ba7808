"""The manifest source: the documents a system of record exports, one per JSONL line or CSV row, from
a file or a URL (docs/catalog.md, "A manifest").

Field names are mapped in config (``fields``). A record missing a required field or holding a value
that cannot be read is refused (``bad_record``) and, when its id is known, keeps its last state; a
line that is not JSON at all, a file that is not UTF-8, or one beyond ``max_bytes`` fails the sync
(a manifest cut short is not a list of deletions). Two records of one id: the later change wins,
the other is refused (``duplicate``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime
from typing import Any

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.fetch import fetch
from ragmon.monitor.config.catalog_sources import ManifestSourceConfig
from ragmon.monitor.core.doc_ids import join_key
from ragmon.monitor.core.model import DocumentEvent

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no", ""})


class _BadRecord(ValueError):
    pass


class ManifestSource:
    """A manifest file or URL as documents (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: ManifestSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context

    def read(self) -> Snapshot:
        data = self._download() if self._config.url is not None else self._file()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise SourceError("bad_format", "the manifest is not UTF-8") from None
        snapshot = Snapshot(documents={})
        for record in self._records(text):
            self._take(record, snapshot)
        documents = snapshot.documents or {}
        if len(documents) > self._config.max_items:
            for doc_id in sorted(documents)[self._config.max_items:]:
                del documents[doc_id]
                snapshot.refuse("too_many", doc_id)
        return snapshot

    def _file(self) -> bytes:
        path = self._config.path
        assert path is not None
        limit = self._config.max_bytes
        try:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
        except OSError as error:
            raise SourceError("unavailable", f"{path}: {error.strerror or error}") from None
        if len(data) > limit:
            raise SourceError("too_large", f"{path}: more than {limit} bytes")
        return data

    def _download(self) -> bytes:
        config = self._config
        assert config.url is not None
        authorization = self._context.secret(config.name, "auth_header", config.auth_header)
        return fetch(config.url, allowed_hosts=config.allowed_hosts, authorization=authorization,
                     timeout=config.timeout_seconds, max_bytes=config.max_bytes, max_redirects=config.max_redirects,
                     transport=self._context.http_transport)  # type: ignore[arg-type]

    def _records(self, text: str):
        if self._config.format == "csv":
            yield from csv.DictReader(io.StringIO(text, newline=""))
            return
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise SourceError("bad_format", f"line {number} is not JSON") from None
            yield record if isinstance(record, dict) else {}

    def _take(self, record: dict[str, Any], snapshot: Snapshot) -> None:
        fields = self._config.fields
        raw_id = record.get(fields.doc_id)
        doc_id = join_key(self._config.id_prefix + raw_id) if isinstance(raw_id, str) and raw_id.strip() else None
        try:
            if doc_id is None:
                raise _BadRecord
            tenant = _optional_text(record.get(fields.tenant)) if fields.tenant else None
            event = DocumentEvent(
                doc_id=doc_id, version=_text(record.get(fields.version)),
                modified_at=_time(record.get(fields.modified_at)), tenant=tenant or self._config.tenant,
                acl=self._acl(record.get(fields.acl)) if fields.acl else None,
                deleted=_flag(record.get(fields.deleted)) if fields.deleted else False)
        except _BadRecord:
            snapshot.refuse("bad_record", doc_id)
            return
        documents = snapshot.documents
        assert documents is not None
        earlier = documents.get(doc_id)
        if earlier is not None:
            snapshot.refuse("duplicate")
            if earlier.modified_at >= event.modified_at:  # type: ignore[operator]
                return
        documents[doc_id] = event

    def _acl(self, value: Any) -> list[str] | None:
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return [name.strip() for name in value.split(self._config.acl_separator) if name.strip()]
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return [item.strip() for item in value if item.strip()]
        raise _BadRecord


def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _BadRecord
    text = str(value).strip()
    if not text:
        raise _BadRecord
    return text


def _optional_text(value: Any) -> str | None:
    return None if value is None or value == "" else _text(value)


def _time(value: Any) -> float:
    """RFC 3339 with an offset (``Z`` too), or Unix seconds (a number, or digits in a CSV cell)."""
    if isinstance(value, bool):
        raise _BadRecord
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise _BadRecord from None
            if parsed.tzinfo is None:
                raise _BadRecord from None
            seconds = parsed.timestamp()
    else:
        raise _BadRecord
    if not math.isfinite(seconds):
        raise _BadRecord
    return seconds


def _flag(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _BadRecord
