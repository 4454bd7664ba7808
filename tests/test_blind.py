"""A monitor that says when it is blind, end to end on real `ragmon serve` processes: the same
traces, served once with no catalog at all and once with one, show the index as blind (every
passage counted as not judged, coverage 0, the status page and `ragmon trace show` saying so) and
as healthy (every passage judged, coverage 1). Expected counts come from the traces as sent."""

from __future__ import annotations

import json
import time

import httpx
from click.testing import CliRunner

from ragmon.monitor.app.cli import main
from tests.ragmon_process import RagmonServer, scraped

DOCUMENTS = [f"policy-{n}" for n in range(6)]


def traces(now: float, count: int = 12) -> list[dict]:
    """Questions answered from the `policies` index: four candidates (doc_id and doc_version, no
    ACL, no times: what most vector stores give back), the first two in the context."""
    events = []
    for n in range(count):
        docs = [DOCUMENTS[(n + k) % len(DOCUMENTS)] for k in range(4)]
        passages = [{"id": f"{doc}#{n % 3}", "doc_id": doc, "doc_version": "v2", "score": 0.9 - k / 10}
                    for k, doc in enumerate(docs)]
        events.append({"type": "trace", "trace_id": f"q-{n}", "time": now - 60 + n, "tenant": "acme",
                       "caller": {"id": f"user-{n}", "groups": ["staff"]}, "index": {"name": "policies"},
                       "query": "how many days carry over",
                       "retrievals": [{"retriever": "vector", "passages": passages}],
                       "context": passages[:2], "answer": {"text": "five", "citations": [passages[0]["id"]]}})
    return events


def catalog(now: float) -> list[dict]:
    """Every document current at v2, readable by staff, and indexed at v2."""
    return ([{"type": "document", "doc_id": doc, "tenant": "acme", "version": "v2", "modified_at": now - 7200,
              "acl": ["group:staff"]} for doc in DOCUMENTS]
            + [{"type": "index", "index": "policies", "doc_id": doc, "version": "v2", "indexed_at": now - 3600}
               for doc in DOCUMENTS])


def post(url: str, events: list[dict]) -> None:
    answer = httpx.post(f"{url}/v1/events", content="\n".join(json.dumps(e) for e in events),
                        headers={"content-type": "application/x-ndjson"}, timeout=30)
    assert answer.status_code == 200 and answer.json()["rejected"] == 0, answer.text


def served_passages(events: list[dict]) -> dict[str, int]:
    """Distinct passage ids per trace and stage, summed: what every check counts once."""
    return {"candidates": sum(len({p["id"] for r in e["retrievals"] for p in r["passages"]}) for e in events),
            "context": sum(len({p["id"] for p in e["context"]}) for e in events)}


def coverage(url: str, check: str) -> float:
    return scraped(url, "ragmon_passage_coverage_ratio", index="policies", check=check)


def test_the_same_traces_show_the_index_blind_without_a_catalog_and_healthy_with_one(tmp_path):
    now = time.time()
    sent = traces(now)
    expected = served_passages(sent)
    assert expected == {"candidates": 48, "context": 24}
    (tmp_path / "blind").mkdir()
    (tmp_path / "seeing").mkdir()
    with RagmonServer(tmp_path / "blind") as blind, RagmonServer(tmp_path / "seeing") as seeing:
        post(seeing.url, catalog(now))
        post(blind.url, sent)
        post(seeing.url, sent)

        for url in (blind.url, seeing.url):  # no leak and no stale passage either way: the zeros look alike
            assert scraped(url, "ragmon_permission_violations_total") == 0
            assert scraped(url, "ragmon_stale_passages_served_total") == 0
        for stage, n in expected.items():
            for check in ("access", "freshness"):
                assert scraped(blind.url, "ragmon_passages_unjudged_total", stage=stage, check=check,
                               reason="unknown_document") == n
                assert scraped(blind.url, "ragmon_passages_judged_total", stage=stage, check=check) == 0
                assert scraped(seeing.url, "ragmon_passages_judged_total", stage=stage, check=check) == n
                assert scraped(seeing.url, "ragmon_passages_unjudged_total", stage=stage, check=check) == 0
        assert coverage(blind.url, "access") == coverage(blind.url, "freshness") == 0.0
        assert coverage(seeing.url, "access") == coverage(seeing.url, "freshness") == 1.0

        blind_page, seeing_page = httpx.get(f"{blind.url}/").text, httpx.get(f"{seeing.url}/").text
        assert blind_page.count("(blind: 0% judged)") == 2  # beside the leak and the stale count
        assert "unknown: no index event" in blind_page  # the catalog table lists the index it never heard of
        assert "no index entries in the catalog: nothing is reconciled" in blind_page  # not an empty table
        assert "blind" not in seeing_page and "(100% judged)" in seeing_page
        assert "nothing is reconciled" not in seeing_page

        blind_findings = httpx.get(f"{blind.url}/api/v1/findings", params={"signal": "not_judged", "limit": 100})
        assert {f["trace_id"] for f in blind_findings.json()["findings"]} == {e["trace_id"] for e in sent}
        seeing_findings = httpx.get(f"{seeing.url}/api/v1/findings", params={"limit": 100}).json()["findings"]
        assert seeing_findings == []

    runner = CliRunner()
    shown = runner.invoke(main, ["trace", "show", "q-0", "-o", "json"],
                          env={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'blind' / 'ragmon.db'}"})
    assert shown.exit_code == 0, shown.output
    [finding] = json.loads(shown.stdout)["findings"]
    assert finding["reason"] == ("not judged: access of 4 passage(s) (4 of documents the catalog does not know); "
                                 "freshness of 4 passage(s) (4 of documents the catalog does not know)")
    assert finding["passage_ids"][:2] == [p["id"] for p in sent[0]["context"]]  # what the model saw first
    unseen = runner.invoke(main, ["trace", "show", "q-0"],
                           env={"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'seeing' / 'ragmon.db'}"})
    assert unseen.exit_code == 1  # judged and clean: no finding, nothing sampled
