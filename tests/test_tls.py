"""`ragmon serve` over TLS and mutual TLS, as a process, with certificates made for the test
(trustme) and a real client (httpx): a client that trusts the CA is served; plain HTTP, an
untrusting client, and under mutual TLS a client without a certificate or with one from another
CA are refused before anything reaches the pipeline."""

from __future__ import annotations

import json
import ssl
import time

import httpx
import pytest
import trustme

from tests.ragmon_process import RagmonServer

TOKEN = "tls-test-token"


def event(n: int) -> bytes:
    return json.dumps({"type": "trace", "trace_id": f"tls-{n}", "time": time.time() - 1, "query": "q",
                       "index": {"name": "policies"}}).encode()


def post(client: httpx.Client, url: str, n: int) -> httpx.Response:
    return client.post(f"{url}/v1/events", content=event(n),
                       headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/x-ndjson"})


@pytest.fixture
def pki(tmp_path):
    """A server CA with a certificate for 127.0.0.1, and a client CA with a client certificate."""
    server_ca, client_ca, stranger_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server_cert = server_ca.issue_cert("127.0.0.1")
    files = {"server_chain": tmp_path / "server.pem", "server_key": tmp_path / "server.key",
             "client_ca": tmp_path / "client-ca.pem"}
    server_cert.private_key_pem.write_to_path(str(files["server_key"]))
    for i, blob in enumerate(server_cert.cert_chain_pems):
        blob.write_to_path(str(files["server_chain"]), append=i > 0)
    client_ca.cert_pem.write_to_path(str(files["client_ca"]))

    def context(client_cert_ca: trustme.CA | None = None) -> ssl.SSLContext:
        trusting = ssl.create_default_context()
        server_ca.configure_trust(trusting)
        if client_cert_ca is not None:
            client_cert_ca.issue_cert("ragmon-client@example.com").configure_cert(trusting)
        return trusting

    return files, context, client_ca, stranger_ca


def test_tls_serves_a_trusting_client_and_nothing_else(tmp_path, pki):
    files, context, _, _ = pki
    env = {"RAGMON_HTTP__TOKEN": TOKEN, "RAGMON_HTTP__TLS_CERT_FILE": str(files["server_chain"]),
           "RAGMON_HTTP__TLS_KEY_FILE": str(files["server_key"])}
    with RagmonServer(tmp_path, verify=context(), **env) as server:
        assert server.url.startswith("https://")
        with httpx.Client(verify=context(), timeout=10) as client:
            assert post(client, server.url, 1).json()["accepted"] == 1
        with pytest.raises(httpx.TransportError):
            httpx.get(server.url.replace("https://", "http://") + "/healthz", timeout=5)
        with pytest.raises(httpx.ConnectError):  # the default trust store does not know the test CA
            httpx.get(f"{server.url}/healthz", timeout=5)
        assert scraped_over_tls(server.url, context()) == 1


def test_mutual_tls_requires_a_client_certificate_from_the_configured_ca(tmp_path, pki):
    files, context, client_ca, stranger_ca = pki
    env = {"RAGMON_HTTP__TOKEN": TOKEN, "RAGMON_HTTP__TLS_CERT_FILE": str(files["server_chain"]),
           "RAGMON_HTTP__TLS_KEY_FILE": str(files["server_key"]),
           "RAGMON_HTTP__TLS_CLIENT_CA_FILE": str(files["client_ca"])}
    with RagmonServer(tmp_path, verify=context(client_ca), **env) as server:
        for refused in (context(), context(stranger_ca)):  # no certificate; one from another CA
            with pytest.raises(httpx.TransportError), httpx.Client(verify=refused, timeout=5) as client:
                post(client, server.url, 2)
        with httpx.Client(verify=context(client_ca), timeout=10) as client:
            assert post(client, server.url, 3).json()["accepted"] == 1
        assert scraped_over_tls(server.url, context(client_ca)) == 1


def scraped_over_tls(url: str, context: ssl.SSLContext) -> float:
    """``ragmon_events_total`` read over the same TLS the clients use."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", verify=context, timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "ragmon_events_total")

