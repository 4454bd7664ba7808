"""The manifest source: JSONL and CSV exports with their own field names, from a file or from a real HTTP
server on 127.0.0.1 (allowed hosts, redirects, time and byte limits, the credential by reference)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ragmon.collectors.catalog_sources.base import SourceContext, SourceError
from ragmon.collectors.catalog_sources.manifest import ManifestSource
from ragmon.monitor.config.catalog_sources import ManifestSourceConfig

TOKEN = "Bearer s3cr3t-manifest-token-9f1c"


def read(environ=None, **options):
    config = ManifestSourceConfig(name="wiki", kind="manifest", **options)
    return ManifestSource(config, SourceContext(time.time, environ or {})).read()


def test_a_jsonl_export_with_its_own_field_names(tmp_path):
    lines = [
        {"id": "SPACE/Leave", "etag": "17", "updated": "2026-05-01T09:00:00+02:00", "readers": ["group:hr"],
         "space": "acme"},
        {"id": "SPACE/Pay", "etag": 3, "updated": 1777777777, "readers": "group:payroll;user:u-7", "space": "acme"},
        {"id": "SPACE/Old", "etag": "9", "updated": "2026-01-01T00:00:00Z", "gone": True},
        {"id": "SPACE/Open", "etag": "1", "updated": "2026-01-01T00:00:00Z", "readers": []},
    ]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    documents = read(path=path, fields={"doc_id": "id", "version": "etag", "modified_at": "updated", "acl": "readers",
                                        "tenant": "space", "deleted": "gone"},
                     acl_separator=";", tenant="default-tenant", id_prefix="confluence/").documents
    assert set(documents) == {"confluence/SPACE/Leave", "confluence/SPACE/Pay", "confluence/SPACE/Old",
                              "confluence/SPACE/Open"}
    leave = documents["confluence/SPACE/Leave"]
    assert (leave.version, leave.modified_at, leave.acl, leave.tenant) == (
        "17", datetime.fromisoformat("2026-05-01T09:00:00+02:00").timestamp(), ["group:hr"], "acme")
    pay = documents["confluence/SPACE/Pay"]
    assert (pay.version, pay.modified_at, pay.acl) == ("3", 1777777777.0, ["group:payroll", "user:u-7"])
    old = documents["confluence/SPACE/Old"]
    assert old.deleted and old.tenant == "default-tenant" and old.acl is None
    assert documents["confluence/SPACE/Open"].acl == []


def test_a_csv_export(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("Path,Modified,ETag,Permissions,Deleted\n"
                    "sites/hr/leave.docx,2026-05-01T10:00:00Z,\"0x01,2\",\"group:hr,group:staff\",no\n"
                    "sites/hr/gone.docx,1777000000,4,,yes\n")
    documents = read(path=path, format="csv", fields={"doc_id": "Path", "version": "ETag", "modified_at": "Modified",
                                                      "acl": "Permissions", "tenant": None, "deleted": "Deleted"}
                     ).documents
    leave, gone = documents["sites/hr/leave.docx"], documents["sites/hr/gone.docx"]
    assert (leave.version, leave.acl, leave.deleted) == ("0x01,2", ["group:hr", "group:staff"], False)
    assert leave.modified_at == datetime.fromisoformat("2026-05-01T10:00:00+00:00").timestamp()
    assert (gone.modified_at, gone.acl, gone.deleted) == (1777000000.0, None, True)


def test_records_that_cannot_be_read_are_refused_and_keep_their_state(tmp_path):
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [
        {"doc_id": "a", "version": "1", "modified_at": "2026-05-01T10:00:00Z"},
        {"doc_id": "b", "version": "1", "modified_at": "2026-05-01 10:00:00"},  # no offset
        {"doc_id": "c", "modified_at": 1777000000},  # no version
        {"version": "1", "modified_at": 1777000000},  # no id
        {"doc_id": "d", "version": "1", "modified_at": 1777000000, "deleted": "perhaps"},
        {"doc_id": "e", "version": "1", "modified_at": 1777000000, "acl": [1]},
        {"doc_id": "a", "version": "0", "modified_at": "2026-04-01T10:00:00Z"},  # an older record of a
        ["not", "an", "object"],
    ]) + "\n")
    snapshot = read(path=path)
    assert set(snapshot.documents) == {"a"} and snapshot.documents["a"].version == "1"
    assert snapshot.refused == {"bad_record": 6, "duplicate": 1}
    assert snapshot.unread == {"b", "c", "d", "e"}


@pytest.mark.parametrize(("data", "reason"), [
    (b'{"doc_id": "a", "version": "1", "modified_at": 1}\n{"doc_id": "b", "vers', "bad_format"),  # cut short
    (b"\xff\xfe not utf-8", "bad_format"),
    (b"x" * 2000, "too_large"),
])
def test_a_manifest_cut_short_or_too_large_fails_whole(tmp_path, data, reason):
    path = tmp_path / "export.jsonl"
    path.write_bytes(data)
    with pytest.raises(SourceError) as raised:
        read(path=path, max_bytes=1000)
    assert raised.value.reason == reason


def test_a_missing_manifest_fails_the_read(tmp_path):
    with pytest.raises(SourceError) as raised:
        read(path=tmp_path / "none.jsonl")
    assert raised.value.reason == "unavailable"


# -- over HTTP ---------------------------------------------------------------------------------------

BODY = b'{"doc_id": "a", "version": "1", "modified_at": 1777000000}\n'


class _Handler(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up on purpose
            self._answer()

    def _answer(self) -> None:
        _Handler.seen.append((self.path, self.headers.get("Authorization")))
        port = self.server.server_address[1]
        if self.path == "/manifest.jsonl":
            if self.headers.get("Authorization") != TOKEN:
                return self._send(401, b"no")
            return self._send(200, BODY)
        if self.path == "/open.jsonl":
            return self._send(200, BODY)
        if self.path == "/moved":
            return self._redirect("/manifest.jsonl")
        if self.path == "/to-localhost":
            return self._redirect(f"http://localhost:{port}/open.jsonl")
        if self.path == "/away":
            return self._redirect("https://elsewhere.example/manifest.jsonl")
        if self.path == "/away-plain":
            return self._redirect("http://elsewhere.example/manifest.jsonl")
        if self.path == "/loop":
            return self._redirect("/loop")
        if self.path == "/big":
            return self._send(200, b"x" * 5000)
        if self.path == "/big-unannounced":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * 5000)
            return None
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)
            return None
        return self._send(404, b"not found")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def fetched(url: str, **options):
    options = {"allowed_hosts": ["127.0.0.1"], "auth_header": "env:MANIFEST_AUTH", **options}
    return read(environ={"MANIFEST_AUTH": TOKEN}, url=url, **options)


def test_a_manifest_from_an_allowed_host_with_the_credential_by_reference(server):
    _Handler.seen.clear()
    assert set(fetched(f"{server}/manifest.jsonl").documents) == {"a"}
    assert _Handler.seen == [("/manifest.jsonl", TOKEN)]


def test_a_redirect_on_the_same_host_is_followed(server):
    _Handler.seen.clear()
    assert set(fetched(f"{server}/moved").documents) == {"a"}
    assert _Handler.seen == [("/moved", TOKEN), ("/manifest.jsonl", TOKEN)]


def test_a_redirect_to_another_allowed_host_goes_without_the_credential(server):
    _Handler.seen.clear()
    assert set(fetched(f"{server}/to-localhost", allowed_hosts=["127.0.0.1", "localhost"]).documents) == {"a"}
    assert _Handler.seen == [("/to-localhost", TOKEN), ("/open.jsonl", None)]


@pytest.mark.parametrize(("path", "options", "reason"), [
    ("/to-localhost", {}, "not_allowed"),  # localhost is not among the allowed hosts
    ("/away", {}, "not_allowed"),
    ("/away-plain", {"allowed_hosts": ["127.0.0.1", "elsewhere.example"]}, "not_allowed"),  # plain http
    ("/loop", {}, "unavailable"),
    ("/big", {"max_bytes": 1000}, "too_large"),
    ("/big-unannounced", {"max_bytes": 1000}, "too_large"),
    ("/slow", {"timeout_seconds": 1.0}, "timeout"),
    ("/missing.jsonl", {}, "unavailable"),
])
def test_what_a_download_may_not_do_fails_the_read(server, path, options, reason):
    started = time.monotonic()
    with pytest.raises(SourceError) as raised:
        fetched(f"{server}{path}", **options)
    assert raised.value.reason == reason, str(raised.value)
    assert time.monotonic() - started < 5
    assert TOKEN not in str(raised.value) and "s3cr3t" not in str(raised.value)


def test_an_unset_credential_fails_naming_the_reference_not_a_value(server):
    with pytest.raises(SourceError) as raised:
        read(environ={}, url=f"{server}/manifest.jsonl", allowed_hosts=["127.0.0.1"], auth_header="env:MANIFEST_AUTH")
    assert "MANIFEST_AUTH" in str(raised.value) and raised.value.reason == "unavailable"


@pytest.mark.parametrize(("url", "hosts", "message"), [
    ("https://docs.example/m.jsonl", ["other.example"], "not in allowed_hosts"),
    ("http://docs.example/m.jsonl", ["docs.example"], "plain http"),
    ("https://user:pa55w0rd@docs.example/m.jsonl", ["docs.example"], "holds credentials"),
    ("ftp://docs.example/m.jsonl", ["docs.example"], "http:// or https://"),
])
def test_a_url_that_may_not_be_fetched_is_a_config_error(url, hosts, message):
    from ragmon.monitor.config.settings import ConfigError, load_settings

    source = {"name": "m", "kind": "manifest", "url": url, "allowed_hosts": hosts}
    with pytest.raises(ConfigError, match=message) as raised:
        load_settings(environ={"RAGMON_CATALOG__SOURCES": json.dumps([source])})
    assert "catalog.sources.0.manifest" in str(raised.value) and "pa55w0rd" not in str(raised.value)


def test_one_of_path_and_url(tmp_path):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="set path or url"):
        ManifestSourceConfig(name="m", kind="manifest")
    with pytest.raises(ValidationError, match="set path or url"):
        ManifestSourceConfig(name="m", kind="manifest", path=Path("/x"), url="https://a.example/m",
                             allowed_hosts=["a.example"])
