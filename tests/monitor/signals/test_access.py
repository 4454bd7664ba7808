"""Permission violations: caller principals, ACL verdicts (catalog first, "*", unknown), other
tenants, and distinct passage ids per stage."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ragmon.monitor.core.catalog import Catalog
from ragmon.monitor.core.model import Caller, DocumentEvent, IndexRef, Passage, Retrieval, TraceEvent
from ragmon.monitor.core.signals.access import caller_principals, permission_violations
from ragmon.monitor.core.signals.results import MAX_IDS, AccessFindings

NOW = 1_796_000_000.0


def make_trace(retrievals=(), context=None, tenant="acme", caller=None) -> TraceEvent:
    return TraceEvent(
        trace_id="t1", time=NOW, query="How many vacation days carry over?", index=IndexRef("policies"),
        tenant=tenant, caller=Caller("u-1", ["staff"]) if caller is None else caller,
        retrievals=[Retrieval(name, list(passages)) for name, passages in retrievals], context=context,
    )


def p(pid: str, acl=None, doc_id=None) -> Passage:
    return Passage(id=pid, acl=acl, doc_id=doc_id)


def catalog_with(*documents: DocumentEvent) -> Catalog:
    catalog = Catalog()
    for document in documents:
        catalog.apply_document(document)
    return catalog


def document(doc_id, tenant="acme", acl=None) -> DocumentEvent:
    return DocumentEvent(doc_id=doc_id, version="1", modified_at=NOW - 100, tenant=tenant, acl=acl)


# --- principals ------------------------------------------------------------------------------------


def test_caller_principals_are_user_tenant_and_groups():
    trace = make_trace(caller=Caller("u-123", ["staff", "hr"]))
    assert caller_principals(trace) == {"user:u-123", "tenant:acme", "group:staff", "group:hr"}


def test_caller_principals_without_caller_is_the_tenant_only():
    trace = make_trace()
    trace.caller = None
    assert caller_principals(trace) == {"tenant:acme"}


def test_caller_principals_without_caller_id_has_no_user():
    assert caller_principals(make_trace(caller=Caller(None, ["hr"]))) == {"tenant:acme", "group:hr"}
    assert caller_principals(make_trace(caller=Caller("", []), tenant="default")) == {"tenant:default"}


# --- verdicts --------------------------------------------------------------------------------------


def test_empty_trace_has_no_findings():
    assert permission_violations(make_trace(), Catalog()) == AccessFindings(0, 0, 0, [])


def test_passages_readable_by_group_user_tenant_or_everyone_are_allowed():
    passages = [p("a", ["group:staff"]), p("b", ["user:u-1"]), p("c", ["tenant:acme"]), p("d", ["*"]),
                p("e", ["group:hr", "group:staff"])]
    assert permission_violations(make_trace([("vector", passages)]), Catalog()) == AccessFindings(0, 0, 0, [])


def test_passage_sharing_no_principal_with_the_caller_is_a_violation_at_both_stages():
    trace = make_trace([("vector", [p("a", ["group:hr"], doc_id="salaries")])])  # context absent: last list
    assert permission_violations(trace, Catalog()) == AccessFindings(1, 1, 0, ["salaries"])


def test_principals_of_another_kind_do_not_match():
    # "staff" as a user id is not the group staff; "tenant:globex" is not tenant acme
    passages = [p("a", ["user:staff"]), p("b", ["tenant:globex"]), p("c", ["staff"])]
    assert permission_violations(make_trace([("vector", passages)]), Catalog()).candidates == 3


def test_an_empty_acl_allows_nobody():
    assert permission_violations(make_trace([("vector", [p("a", [])])]), Catalog()) == AccessFindings(1, 1, 0, [])


def test_passages_with_unknown_acl_count_as_unknown_not_as_violations():
    trace = make_trace([("bm25", [p("a"), p("b", ["group:hr"])]), ("vector", [p("a"), p("c")])])
    assert permission_violations(trace, Catalog()) == AccessFindings(1, 0, 2, [])


def test_the_same_passage_in_two_retrieval_lists_counts_once_per_stage():
    bad = p("x#1", ["group:hr"], doc_id="x")
    trace = make_trace([("bm25", [bad, p("ok", ["*"])]), ("vector", [bad]), ("rerank", [bad, bad])])
    assert permission_violations(trace, Catalog()) == AccessFindings(1, 1, 0, ["x"])


def test_copies_of_one_passage_that_disagree_are_judged_by_the_one_that_excludes():
    """One passage id whose copies carry conflicting ACLs (a stale candidate copy says ``*``, a later
    copy says ``group:hr``) is a violation at every stage it appears in, whichever copy comes first."""
    public, private = p("x#1", ["*"], doc_id="x"), p("x#1", ["group:hr"], doc_id="x")
    first_public = make_trace([("bm25", [public]), ("rerank", [private])], context=[public])
    first_private = make_trace([("bm25", [private]), ("rerank", [public])], context=[public])
    assert permission_violations(first_public, Catalog()) == AccessFindings(1, 1, 0, ["x"])
    assert permission_violations(first_private, Catalog()) == AccessFindings(1, 1, 0, ["x"])
    unknown_then_public = make_trace([("bm25", [p("y#1")]), ("rerank", [p("y#1", ["*"])])])
    assert permission_violations(unknown_then_public, Catalog()) == AccessFindings(0, 0, 0, [])


def test_context_absent_means_the_last_retrieval_list():
    trace = make_trace([("bm25", [p("a", ["group:hr"]), p("b", ["group:hr"])]), ("rerank", [p("b", ["group:hr"])])])
    assert permission_violations(trace, Catalog()) == AccessFindings(2, 1, 0, [])


def test_explicit_context_is_counted_on_its_own():
    trace = make_trace([("vector", [p("a", ["group:hr"]), p("b", ["group:staff"])])],
                       context=[p("b", ["group:staff"]), p("c", ["group:legal"])])
    assert permission_violations(trace, Catalog()) == AccessFindings(1, 1, 0, [])


def test_empty_context_has_no_context_violations():
    trace = make_trace([("vector", [p("a", ["group:hr"])])], context=[])
    assert permission_violations(trace, Catalog()) == AccessFindings(1, 0, 0, [])


def test_catalog_acl_takes_precedence_over_the_passage_acl_for_a_revocation():
    catalog = catalog_with(document("handbook", acl=["group:hr"]))  # staff lost access after indexing
    trace = make_trace([("vector", [p("h#1", ["group:staff"], doc_id="handbook")])])
    assert permission_violations(trace, catalog) == AccessFindings(1, 1, 0, ["handbook"])


def test_catalog_acl_takes_precedence_over_the_passage_acl_for_a_grant():
    catalog = catalog_with(document("handbook", acl=["group:staff"]))
    trace = make_trace([("vector", [p("h#1", ["group:hr"], doc_id="handbook")])])
    assert permission_violations(trace, catalog) == AccessFindings(0, 0, 0, [])


def test_catalog_revocation_of_a_public_passage():
    catalog = catalog_with(document("memo", acl=["group:board"]))
    trace = make_trace([("vector", [p("m#1", ["*"], doc_id="memo")])])
    assert permission_violations(trace, catalog) == AccessFindings(1, 1, 0, ["memo"])


def test_a_document_revoked_to_nobody_leaks_through_a_passage_that_says_everyone():
    """An empty catalog ACL is an ACL (nobody may read), not a missing one: the passage's own
    ``*`` from before the revocation must not admit the caller."""
    catalog = catalog_with(document("memo", acl=[]))
    trace = make_trace([("vector", [p("m#1", ["*"], doc_id="memo"), p("m#2", doc_id="memo")])])
    assert permission_violations(trace, catalog) == AccessFindings(2, 2, 0, ["memo"])


def test_catalog_acl_gives_a_passage_without_acl_a_verdict():
    catalog = catalog_with(document("memo", acl=["*"]), document("pay", acl=["group:hr"]))
    trace = make_trace([("vector", [p("m#1", doc_id="memo"), p("p#1", doc_id="pay")])])
    assert permission_violations(trace, catalog) == AccessFindings(1, 1, 0, ["pay"])


def test_catalog_document_without_acl_falls_back_to_the_passage_acl():
    catalog = catalog_with(document("memo"), document("pay"))
    trace = make_trace([("vector", [p("m#1", ["group:staff"], doc_id="memo"), p("p#1", ["group:hr"], doc_id="pay"),
                                    p("q#1", doc_id="pay")])])
    assert permission_violations(trace, catalog) == AccessFindings(1, 1, 1, ["pay"])


def test_passage_of_another_tenant_is_a_violation_whatever_its_acl():
    catalog = catalog_with(document("globex-plan", tenant="globex", acl=["*"]))
    passages = [p("g#1", ["*"], doc_id="globex-plan"), p("g#2", ["tenant:acme"], doc_id="globex-plan"),
                p("g#3", doc_id="globex-plan")]
    trace = make_trace([("vector", passages)])
    assert permission_violations(trace, catalog) == AccessFindings(3, 3, 0, ["globex-plan"])


def test_passage_of_the_callers_own_tenant_in_the_catalog_is_judged_by_acl():
    catalog = catalog_with(document("acme-plan", tenant="acme", acl=["tenant:acme"]))
    trace = make_trace([("vector", [p("a#1", doc_id="acme-plan")])])
    assert permission_violations(trace, catalog) == AccessFindings(0, 0, 0, [])


def test_trace_of_the_default_tenant_against_a_catalog_document_of_a_named_tenant():
    catalog = catalog_with(document("acme-plan", tenant="acme", acl=["*"]))
    trace = make_trace([("vector", [p("a#1", ["*"], doc_id="acme-plan")])], tenant="default")
    assert permission_violations(trace, catalog) == AccessFindings(1, 1, 0, ["acme-plan"])


def test_unknown_acl_is_counted_once_across_stages():
    trace = make_trace([("vector", [p("a"), p("b", ["*"])])], context=[p("a"), p("c")])
    assert permission_violations(trace, Catalog()).unknown_acl == 2


def test_violating_doc_ids_are_distinct_and_bounded():
    passages = [p(f"d{i}#{j}", ["group:hr"], doc_id=f"d{i}") for i in range(MAX_IDS + 5) for j in range(2)]
    findings = permission_violations(make_trace([("vector", passages)], context=[]), Catalog())
    assert findings.candidates == 2 * (MAX_IDS + 5)
    assert findings.doc_ids == [f"d{i}" for i in range(MAX_IDS)]


def test_violations_without_doc_id_add_no_doc_id():
    findings = permission_violations(make_trace([("vector", [p("a", ["group:hr"])])]), Catalog())
    assert findings.doc_ids == []


ACLS = st.sampled_from([None, ["*"], ["group:staff"], ["group:hr"], ["user:u-1"], ["user:u-2"], []])
IDS = "abcdefgh"


@given(st.lists(ACLS, min_size=len(IDS), max_size=len(IDS)),
       st.lists(st.lists(st.sampled_from(IDS[:6]), max_size=6), max_size=4),
       st.lists(st.sampled_from(IDS), max_size=6))
def test_counts_are_distinct_passage_ids_per_stage(acls, lists, context):
    acl_of = dict(zip(IDS, acls, strict=True))

    def bad(pid: str) -> bool:
        acl = acl_of[pid]
        return acl is not None and "*" not in acl and not {"group:staff", "user:u-1", "tenant:acme"} & set(acl)

    trace = make_trace([(f"r{i}", [p(pid, acl_of[pid]) for pid in items]) for i, items in enumerate(lists)],
                       context=[p(pid, acl_of[pid]) for pid in context])
    findings = permission_violations(trace, Catalog())
    seen = {pid for items in lists for pid in items} | set(context)
    assert findings.candidates == len({pid for items in lists for pid in items if bad(pid)})
    assert findings.context == len({pid for pid in context if bad(pid)})
    assert findings.unknown_acl == sum(1 for pid in seen if acl_of[pid] is None)


def test_a_leak_shown_only_by_the_context_copy_is_counted_at_both_stages():
    """Candidate lists often carry only id and score; the context copy carries the ACL. The copy
    that knows decides, whichever list it is in."""
    trace = TraceEvent(
        trace_id="t", time=1.0, query="q", index=IndexRef("policies"), tenant="acme",
        caller=Caller(id="u", groups=["staff"]),
        retrievals=[Retrieval("bm25", [Passage("p1", score=1.0), Passage("p2", score=0.5)])],
        context=[Passage("p1", doc_id="d9", acl=["group:hr"]), Passage("p2", acl=["group:staff"])],
    )
    found = permission_violations(trace, Catalog())
    assert (found.candidates, found.context, found.unknown_acl, found.doc_ids) == (1, 1, 0, ["d9"])


def test_the_documents_that_reached_the_model_are_named_apart_from_the_filtered_ones():
    from ragmon.monitor.core.model import Caller, IndexRef, Passage, Retrieval, TraceEvent

    secret = lambda pid, doc: Passage(id=pid, doc_id=doc, acl=["group:hr"])  # noqa: E731
    trace = TraceEvent(trace_id="t", time=1.0, query="q", index=IndexRef("kb"), caller=Caller("u", ["staff"]),
                       retrievals=[Retrieval("vector", [secret("a", "filtered-doc"), secret("b", "leaked-doc")])],
                       context=[secret("b", "leaked-doc")])
    findings = permission_violations(trace, Catalog())
    assert findings.doc_ids == ["filtered-doc", "leaked-doc"] and findings.context_doc_ids == ["leaked-doc"]


# --- coverage: which passages could be judged at all ------------------------------------------------


def test_every_passage_is_judged_or_counted_not_judged_with_its_reason_per_stage():
    catalog = catalog_with(document("handbook", acl=["group:staff"]), document("memo"))  # memo: no ACL known
    candidates = [p("a", ["*"]), p("b", doc_id="handbook"), p("c", doc_id="memo"), p("d", doc_id="ghost")]
    trace = make_trace([("vector", candidates)], context=[p("c", doc_id="memo"), p("d", doc_id="ghost"), p("e")])
    coverage = permission_violations(trace, catalog).coverage
    assert coverage.judged == {"candidates": 2}
    assert coverage.unjudged == {("candidates", "no_acl"): 1, ("candidates", "unknown_document"): 1,
                                 ("context", "no_acl"): 1, ("context", "unknown_document"): 2}
    assert (coverage.served, coverage.served_unjudged) == (5, 3)
    assert coverage.examples == [("c", "memo", "no_acl"), ("d", "ghost", "unknown_document"),
                                 ("e", None, "unknown_document")]


def test_a_passage_no_copy_of_which_was_judged_is_explained_by_all_its_copies():
    # the retriever's copy names the document, the context's (ids and text only, as some
    # instrumentations report it) does not: the reason and the example come from the copy that says most
    catalog = catalog_with(document("memo"))  # memo: no ACL known
    trace = make_trace([("vector", [p("c", doc_id="memo")])], context=[p("c")])
    coverage = permission_violations(trace, catalog).coverage
    assert coverage.unjudged == {("candidates", "no_acl"): 1, ("context", "no_acl"): 1}
    assert coverage.examples == [("c", "memo", "no_acl")]


def test_a_passage_judged_by_any_copy_is_judged_at_every_stage_it_is_in():
    trace = make_trace([("vector", [p("x"), p("y")])], context=[p("x", ["group:staff"])])
    coverage = permission_violations(trace, Catalog()).coverage
    assert coverage.judged == {"candidates": 1, "context": 1}
    assert coverage.unjudged == {("candidates", "unknown_document"): 1}
    assert (coverage.served, coverage.served_unjudged) == (2, 1)


def test_when_every_passage_is_judged_each_stage_counts_its_distinct_ids():
    trace = make_trace([("vector", [p("a", ["*"]), p("b", ["group:hr"])]), ("bm25", [p("a", ["*"])])],
                       context=[p("a", ["*"])])
    found = permission_violations(trace, Catalog())
    assert found.coverage.judged == {"candidates": 2, "context": 1}
    assert (found.coverage.unjudged, found.coverage.served, found.coverage.served_unjudged) == ({}, 2, 0)
    assert found.flagged == {"b"}  # what a trace judged again after a catalog change is compared with


def test_without_a_catalog_nor_passage_acls_nothing_is_judged():
    trace = make_trace([("vector", [p("a", doc_id="d1"), p("b", doc_id="d2")])])
    coverage = permission_violations(trace, Catalog()).coverage
    assert coverage.judged == {}
    assert coverage.unjudged == {("candidates", "unknown_document"): 2, ("context", "unknown_document"): 2}
    assert coverage.reasons == {"unknown_document": 2}


def test_at_most_max_ids_passages_not_judged_are_named_as_examples():
    passages = [p(f"x{i}", doc_id=f"d{i}") for i in range(MAX_IDS + 1)]
    coverage = permission_violations(make_trace([("vector", passages)]), Catalog()).coverage
    assert coverage.served_unjudged == MAX_IDS + 1
    assert coverage.examples == [(f"x{i}", f"d{i}", "unknown_document") for i in range(MAX_IDS)]


def test_a_trace_with_a_context_and_no_retrieval_list_counts_the_context_stage():
    coverage = permission_violations(make_trace([], context=[p("a", ["*"]), p("b"), p("c")]), Catalog()).coverage
    assert coverage.judged == {"context": 1}
    assert coverage.unjudged == {("context", "unknown_document"): 2}
