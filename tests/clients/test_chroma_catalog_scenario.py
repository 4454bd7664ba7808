"""The catalog from the systems of record, with no glue: a git folder of policies indexed by LangChain into
a persistent Chroma store (doc_id, doc_version, acl, indexed_at in each chunk's metadata), `ragmon serve`
configured with a folder source and a chroma source, then two documents edited, one ACL narrowed and one
document deleted on disk. Questions answered from the store (OpenLLMetry's Chroma instrumentation under
OpenInference roots) go at once to that server and to one with no source at all: the first finds every
stale passage served, every leak the revocation causes, the pending revocation and the deletion still
indexed, the second shows freshness as not judged (blind) instead of a healthy zero. Expected figures
come from the folder on disk (git's blob ids, the front matter written) and from what Chroma returned to
the app, never from ragmon's code."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ragmon.collectors.catalog_sources.base import SourceContext
from ragmon.collectors.catalog_sources.chroma import ChromaSource
from ragmon.monitor.config.catalog_sources import ChromaSourceConfig
from tests.clients.chroma_store import markdown, run_chroma_app
from tests.collectors.catalog_sources.gitrepo import GitRepo
from tests.ragmon_process import RagmonServer, scraped

CALLER = {"id": "u-7", "groups": ["staff"]}
STAFF, PAYROLL = "group:staff", "group:payroll"
CORPUS = {  # path -> (readers, body)
    "policies/leave.md": ([STAFF], "Annual leave: staff carry over five days each year. Leave requests go to the "
                          "manager two weeks ahead."),
    "policies/pay.md": ([STAFF, PAYROLL], "Salaries are paid on the last working day of the month. Payslips "
                        "show overtime and bonus lines."),
    "policies/travel.md": ([STAFF], "Travel: book trains for trips under four hours. The travel desk books "
                           "hotels."),
    "policies/benefits.md": ([STAFF], "Benefits: the health plan covers dental and vision care for every "
                             "employee."),
    "policies/security.md": ([STAFF], "Security: badges are worn at all times. Lost badges are reported to "
                             "reception."),
    "policies/remote.md": ([STAFF], "Remote work: staff may work from home two days each week with the "
                           "manager's consent."),
}
EDITED = {"policies/leave.md": "Annual leave: staff carry over ten days each year now. Leave requests go to the "
          "manager one week ahead.",
          "policies/travel.md": "Travel: book trains for trips under six hours. Flights need approval."}
NARROWED = {"policies/pay.md": [PAYROLL]}
DELETED = "policies/benefits.md"
QUESTIONS = ["How many days of annual leave carry over?", "When are salaries paid?", "Do payslips show overtime?",
             "How long may a train trip be?", "Does the health plan cover dental care?",
             "Where are lost badges reported?", "How many days of remote work each week?",
             "Who books hotels for travel?", "When do leave requests go to the manager?",
             "Are bonus lines on the payslips?"]


def wait_for(what, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while not (value := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)
    return value


def context_count(url: str, name: str, **labels: str) -> float:
    return scraped(url, name, index="policies", stage="context", **labels)


@pytest.mark.slow
def test_a_folder_and_a_chroma_store_find_the_stale_passages_and_the_revocation_leaks(tmp_path):
    repo = GitRepo(tmp_path / "corpus")
    for rel, (acl, body) in CORPUS.items():
        repo.write(rel, markdown(acl, body))
    repo.commit("policies", "2026-06-01T09:00:00+00:00")
    persist = tmp_path / "chroma"
    held = run_chroma_app(tmp_path, "ingest", {"root": str(repo.root), "persist": str(persist),
                                               "collection": "policies"})
    assert {m["doc_id"] for m in held["metadatas"]} == {str(repo.root / rel) for rel in CORPUS}
    sources = [{"name": "policies", "kind": "folder", "root": str(repo.root), "id_prefix": f"{repo.root}/",
                "tenant": "acme", "interval_seconds": 2},
               {"name": "policies-index", "kind": "chroma", "path": str(persist), "collections": ["policies"],
                "interval_seconds": 2}]
    (tmp_path / "seeing").mkdir()
    (tmp_path / "blind").mkdir()
    with (RagmonServer(tmp_path / "seeing", RAGMON_CATALOG__SOURCES=json.dumps(sources)) as seeing,
          RagmonServer(tmp_path / "blind") as blind):
        wait_for(lambda: scraped(seeing.url, "ragmon_catalog_source_items", source="policies") == len(CORPUS))
        wait_for(lambda: scraped(seeing.url, "ragmon_catalog_source_items", source="policies-index") == len(CORPUS))
        assert scraped(seeing.url, "ragmon_catalog_source_changes_total", source="policies-index",
                       kind="index") == len(CORPUS)

        changes_before = scraped(seeing.url, "ragmon_catalog_source_changes_total", source="policies")
        for rel, body in EDITED.items():
            repo.write(rel, markdown(CORPUS[rel][0], body))
        for rel, acl in NARROWED.items():
            repo.write(rel, markdown(acl, CORPUS[rel][1]))
        repo.git("rm", "-q", DELETED)
        repo.commit("edit, revoke, delete", datetime.fromtimestamp(int(time.time()) - 1, UTC).isoformat())
        # two edits, a narrowed ACL (a new version too: the front matter is in the file), a tombstone
        wait_for(lambda: scraped(seeing.url, "ragmon_catalog_source_changes_total", source="policies")
                 >= changes_before + 4)

        asked = run_chroma_app(tmp_path, "ask", {"persist": str(persist), "collection": "policies",
                                                 "index": "policies", "caller": CALLER, "questions": QUESTIONS},
                               exports=("--export", f"simple:protobuf={seeing.url}",
                                        "--export", f"simple:json={blind.url}"))

        # the truth: from the disk now and what Chroma returned, passage by passage
        served = [c for q in asked["questions"] for c in {c["id"]: c for c in q["context"]}.values()]
        stale = leaked = 0
        for chunk in served:
            rel = Path(chunk["metadata"]["doc_id"]).relative_to(repo.root).as_posix()
            on_disk = repo.root / rel
            stale += not on_disk.exists() or repo.blob(rel) != chunk["metadata"]["doc_version"]
            readers_now = NARROWED.get(rel, CORPUS[rel][0])
            leaked += on_disk.exists() and not {f"group:{g}" for g in CALLER["groups"]} & set(readers_now)
        assert stale > 0 and leaked > 0 and len(served) == 3 * len(QUESTIONS)
        assert stale < len(served)  # some passages are current: the count is not every passage

        wait_for(lambda: context_count(seeing.url, "ragmon_passages_judged_total", check="freshness") == len(served))
        assert context_count(seeing.url, "ragmon_stale_passages_served_total") == stale
        assert context_count(seeing.url, "ragmon_permission_violations_total") == leaked
        assert scraped(seeing.url, "ragmon_passage_coverage_ratio", index="policies", check="freshness") == 1.0

        # without traffic, the reconciliation of the catalog: the edits not indexed again, the revocation pending
        # in the index and the deletion still indexed (expected: the files whose blob differs from the version
        # Chroma holds, the ACLs narrowed on disk, the files removed)
        indexed_version = {m["doc_id"]: m["doc_version"] for m in held["metadatas"]}
        stale_documents = sum(1 for rel in CORPUS if (repo.root / rel).exists()
                              and repo.blob(rel) != indexed_version[str(repo.root / rel)])
        assert stale_documents == len(EDITED) + len(NARROWED)  # front matter is in the file: a new version too

        def drift(kind: str, name: str = "ragmon_index_drift_documents") -> float:
            return scraped(seeing.url, name, tenant="acme", index="policies", kind=kind)

        wait_for(lambda: drift("acl_narrower") == len(NARROWED))
        assert drift("stale") == stale_documents and drift("deleted") == 1 and drift("acl_wider") == 0
        assert drift("acl_narrower", "ragmon_index_drift_oldest_seconds") > 0

        # the same traces with no source: the chunks' own ACLs see no revocation, and freshness is not
        # judged at all (every passage of a document the catalog does not know), which the zero says
        wait_for(lambda: context_count(blind.url, "ragmon_passages_unjudged_total", check="freshness",
                                       reason="unknown_document") == len(served))
        assert context_count(blind.url, "ragmon_stale_passages_served_total") == 0
        assert context_count(blind.url, "ragmon_permission_violations_total") == 0
        assert scraped(blind.url, "ragmon_passage_coverage_ratio", index="policies", check="freshness") == 0.0

    # what the index still lets read, as the chroma source hands it to the catalog: the narrowed document's
    # chunks still admit staff (a revocation pending in the index), the deleted one is still indexed
    entries = ChromaSource(ChromaSourceConfig(name="policies-index", kind="chroma", path=persist,
                                              collections=["policies"]), SourceContext(time.time, {})).read()
    by_doc = {doc_id: entry for (_, doc_id), entry in entries.index_entries.items()}
    for rel, acl in NARROWED.items():
        assert by_doc[str(repo.root / rel)].acl == CORPUS[rel][0] and acl != CORPUS[rel][0]
    assert by_doc[str(repo.root / DELETED)].chunks == sum(
        1 for m in held["metadatas"] if m["doc_id"] == str(repo.root / DELETED))
