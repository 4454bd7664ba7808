"""A real `ragmon serve` configured with a git folder (what each document is now) and, separately, LangChain's
record manager (what the index holds), and no glue: a LangChain app indexes the folder with `index()` and a
`SQLRecordManager` whose `key_encoder` writes each file's git blob id into the key; its chunks' metadata names the
source only (no version, no ACL). On disk two documents are edited (one of them re-indexed), one document's
readers narrowed and one deleted, neither indexed again: the passages served of the documents the index holds in an
older version, or holds though deleted, are stale (those of the re-indexed one are not), and those of the narrowed
one leak. Expected figures come from git (blob ids),
LangChain's answers (`index()`'s counts, `list_keys`) and the traces this test sends, never from ragmon's code."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import pytest

from tests.collectors.catalog_sources.frameworks import write
from tests.collectors.catalog_sources.gitrepo import GitRepo, front_matter
from tests.ragmon_process import RagmonServer, scraped
from tests.test_catalog_sources import post, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NAMESPACE = "memory/policies"
CORPUS = {"policies/leave.md": "Ten days a year.\nFive carry over.", "policies/pay.md": "Paid monthly.\nOn the 25th.",
          "policies/travel.md": "Economy class.\nReceipts within 30 days.", "policies/gifts.md": "None over 50.\nAsk."}
CHUNKS = {doc_id: len(text.splitlines()) for doc_id, text in CORPUS.items()}


def index_folder(repo: GitRepo, scratch, texts: dict[str, str]) -> dict:
    """LangChain's index() of the folder's files as ``texts`` says they are, each file's blob id in its keys."""
    plan = {"db": str(scratch / "records.db"), "namespace": NAMESPACE, "store": str(scratch / "store.json"),
            "key_encoder": "version", "documents": {doc_id: text.splitlines() for doc_id, text in texts.items()},
            "versions": {doc_id: blob_of(repo, text) for doc_id, text in texts.items()}}
    return write("record_manager", plan, scratch)


def blob_of(repo: GitRepo, text: str) -> str:
    """git's blob id of a file holding the document ``text`` (what `git hash-object` prints for it)."""
    probe = repo.root.parent / f"probe-{uuid.uuid4().hex}"
    probe.write_text(document(text))
    try:
        return repo.git("hash-object", str(probe))
    finally:
        probe.unlink()


def document(text: str, acl=("group:staff",)) -> str:
    return front_matter(text, acl=list(acl))


def traces(prefix: str, count: int) -> list[dict]:
    """Traces of an app whose chunks' metadata names the source only: no version, no ACL on the passages."""
    passages = [{"id": f"{doc_id}#{n}", "doc_id": doc_id, "score": 0.8}
                for doc_id in CORPUS for n in range(CHUNKS[doc_id])]
    return [{"type": "trace", "trace_id": f"{prefix}-{n}", "time": time.time(), "tenant": "acme",
             "caller": {"id": f"u-{n}", "groups": ["staff"]}, "query": "what is the policy",
             "index": {"name": "policies"}, "retrievals": [{"retriever": "vector", "passages": passages}],
             "context": passages, "answer": {"text": "It depends."}} for n in range(count)]


def stale_served(server: RagmonServer) -> float:
    return scraped(server.url, "ragmon_stale_passages_served_total", index="policies", stage="context")


def test_the_folder_and_the_record_manager_find_the_passages_of_an_edit_not_re_indexed(tmp_path):
    repo = GitRepo(tmp_path / "corpus")
    for doc_id, text in CORPUS.items():
        repo.write(doc_id, document(text))
    repo.commit("policies", "2026-06-01T09:00:00+00:00")
    first = index_folder(repo, tmp_path, CORPUS)
    assert first["result"]["num_added"] == sum(CHUNKS.values())
    assert {doc_id: {key.split(":")[0] for key in keys} for doc_id, keys in first["keys"].items()} == {
        doc_id: {repo.blob(doc_id)} for doc_id in CORPUS}  # the index holds what is on disk

    sources = [{"name": "policies", "kind": "folder", "root": str(repo.root), "tenant": "acme", "interval_seconds": 1},
               {"name": "langchain", "kind": "record_manager", "path": str(tmp_path / "records.db"),
                "namespace": NAMESPACE, "index": "policies", "version_pattern": r"^(?P<version>[0-9a-f]{40}):",
                "interval_seconds": 1}]
    with RagmonServer(tmp_path, RAGMON_CATALOG__SOURCES=json.dumps(sources)) as server:
        wait_for(lambda: scraped(server.url, "ragmon_catalog_source_items", source="langchain") == len(CORPUS)
                 and scraped(server.url, "ragmon_catalog_source_items", source="policies") == len(CORPUS))
        post(server, traces("before", 3))
        assert stale_served(server) == 0

        # two edits, a revocation and a deletion on disk, committed after the traces above were answered; only
        # leave.md is indexed again
        edited = {**CORPUS, "policies/leave.md": "Twelve days a year.\nFive carry over.",
                  "policies/pay.md": "Paid monthly.\nOn the 28th."}
        for doc_id in ("policies/leave.md", "policies/pay.md"):
            repo.write(doc_id, document(edited[doc_id]))
        repo.write("policies/travel.md", document(CORPUS["policies/travel.md"], acl=["group:board"]))
        repo.git("rm", "-q", "policies/gifts.md")
        edited_at = int(time.time()) + 1
        time.sleep(edited_at - time.time() + 0.05)
        repo.commit("edits", datetime.fromtimestamp(edited_at, UTC).isoformat())
        changed = {doc_id for doc_id in CORPUS if not (repo.root / doc_id).exists()
                   or repo.blob(doc_id) not in {k.split(":")[0] for k in first["keys"][doc_id]}}
        assert changed == set(CORPUS)
        time.sleep(1.1)  # the index is written after the edit, in a later second
        changes = scraped(server.url, "ragmon_catalog_source_changes_total", source="langchain")
        reindexed = index_folder(repo, tmp_path, {**CORPUS, "policies/leave.md": edited["policies/leave.md"]})
        assert (reindexed["result"]["num_added"], reindexed["result"]["num_deleted"]) == (
            CHUNKS["policies/leave.md"], CHUNKS["policies/leave.md"])
        held = {doc_id: {key.split(":")[0] for key in keys} for doc_id, keys in reindexed["keys"].items()}
        still_stale = {doc_id for doc_id in CORPUS if not (repo.root / doc_id).exists()
                       or held[doc_id] != {repo.blob(doc_id)}}
        assert still_stale == {"policies/pay.md", "policies/travel.md", "policies/gifts.md"}

        # the folder's syncs: its first four documents, then two edits, a narrowed ACL and a tombstone; the
        # record manager's: the re-indexing seen whole, which the reconciliation says without traffic: the
        # documents edited on disk and not indexed again are stale, the one deleted is still indexed, and
        # leave.md is level again (a sync in the middle of index() would still hold its old records)
        on_disk = {doc_id for doc_id in still_stale if (repo.root / doc_id).exists()}

        def drift(kind: str) -> float:
            return scraped(server.url, "ragmon_index_drift_documents", index="policies", kind=kind)

        wait_for(lambda: scraped(server.url, "ragmon_catalog_source_changes_total", source="policies") >= 4 + 4
                 and scraped(server.url, "ragmon_catalog_source_changes_total", source="langchain") > changes
                 and (drift("stale"), drift("deleted")) == (len(on_disk), len(still_stale - on_disk)))
        after = traces("after", 4)
        post(server, after)
        expected = sum(1 for trace in after for passage in trace["context"] if passage["doc_id"] in still_stale)
        assert expected == 4 * 6
        wait_for(lambda: stale_served(server) >= expected, timeout=30)
        assert stale_served(server) == expected
        # the caller's group no longer reads travel.md: each of its passages served after is a leak
        leaked = sum(1 for trace in after for passage in trace["context"] if passage["doc_id"] == "policies/travel.md")
        assert scraped(server.url, "ragmon_permission_violations_total", index="policies", stage="context") == leaked
        # every passage was judged for freshness: by the version the record manager says the index held
        passages = (3 + len(after)) * sum(CHUNKS.values())  # the traces before the edits and after
        assert scraped(server.url, "ragmon_passages_unjudged_total", index="policies", stage="context",
                       check="freshness") == 0
        assert scraped(server.url, "ragmon_passages_judged_total", index="policies", stage="context",
                       check="freshness") == passages
