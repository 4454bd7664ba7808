"""Evaluation metrics: agreement with ir-measures (trec_eval underneath) on thousands of random
runs, the rules of docs/sampling.md that go beyond document ids (versions, spans, repeats, abstention),
and the groups of the report (splits, tags, first turns and follow-ups) with their floors and drops."""

from __future__ import annotations

import json
import random
import re

import ir_measures
import pytest
from ir_measures import RR, P, R, Success, nDCG

from ragmon.monitor.labeling.evaluate import (
    Case,
    Claim,
    EarlierTurn,
    LabeledUnit,
    RetrievedItem,
    RunEntry,
    case_metrics,
    evaluate,
    gate,
    load_cases,
    load_runs,
    parse_threshold,
)

KS = (1, 3, 5, 10)


def random_case(rng: random.Random, n: int):
    docs = [f"d{i}" for i in range(rng.randint(3, 30))]
    judged = rng.sample(docs, rng.randint(1, len(docs)))
    grades = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
    if not any(grades.values()):
        grades[judged[0]] = rng.choice([1, 2])
    retrieved = rng.sample(docs + [f"x{i}" for i in range(10)], rng.randint(0, min(15, len(docs) + 10)))
    return f"q{n}", grades, retrieved


def test_metrics_agree_with_ir_measures_on_random_runs():
    rng = random.Random(2026)
    qrels, run, ours = [], [], {}
    for n in range(3000):
        qid, grades, retrieved = random_case(rng, n)
        qrels += [ir_measures.Qrel(qid, d, g) for d, g in grades.items()]
        # strictly falling scores keep trec_eval from re-ordering ties
        run += [ir_measures.ScoredDoc(qid, d, float(len(retrieved) - i)) for i, d in enumerate(retrieved)]
        units = [LabeledUnit(doc_id=d, grade=g) for d, g in grades.items()]
        items = [RetrievedItem(id=f"{d}#chunk", doc_id=d) for d in retrieved]
        ours[qid] = {k: case_metrics(items, units, k) for k in KS}
    names = {}
    for k in KS:
        names.update({R @ k: ("recall", k), P @ k: ("precision", k), Success @ k: ("hit", k), RR @ k: ("mrr", k),
                      nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}) @ k: ("ndcg", k)})  # gain 2^g - 1
    compared = 0
    for metric in ir_measures.iter_calc(list(names), qrels, run):
        name, k = names[metric.measure]
        assert ours[metric.query_id][k][name] == pytest.approx(metric.value, abs=1e-9), (metric, ours[metric.query_id])
        compared += 1
    # queries that retrieve nothing are absent from trec_eval's output; every other one was compared
    assert compared >= 0.9 * 3000 * len(names)


def item(doc, version=None, span=None):
    return RetrievedItem(id=f"{doc}#x", doc_id=doc, doc_version=version, span=span)


def test_spans_and_versions_decide_relevance_and_survive_rechunking():
    units = [LabeledUnit(doc_id="leave", doc_version="3", span=(1200, 1680), grade=2)]
    assert case_metrics([item("leave", "3", (1600, 2000))], units, 1)["recall"] == 1.0  # overlapping new chunk
    assert case_metrics([item("leave", "3", (1000, 1300))], units, 1)["recall"] == 1.0  # over the unit's start
    assert case_metrics([item("leave", "3", (0, 1200))], units, 1)["recall"] == 0.0  # adjacent, no overlap
    assert case_metrics([item("leave", "3", (1680, 2000))], units, 1)["recall"] == 0.0  # adjacent after it
    assert case_metrics([item("leave", "4", (1200, 1680))], units, 1)["recall"] == 0.0  # another version
    assert case_metrics([item("leave")], units, 1)["recall"] == 1.0  # no version, no span: the document decides
    assert case_metrics([RetrievedItem(id="leave")], units, 1)["recall"] == 1.0  # the id is the document


def test_a_unit_earns_credit_once_and_repeats_earn_nothing():
    units = [LabeledUnit(doc_id="a", grade=1), LabeledUnit(doc_id="b", grade=2)]
    scores = case_metrics([item("a"), item("a"), item("b")], units, 3)
    assert scores["recall"] == 1.0 and scores["precision"] == pytest.approx(2 / 3)
    assert scores["mrr"] == 1.0
    dcg = 1 / 1 + 3 / 2  # a at 1 (gain 1), b at 3 (gain 3, log2(4) = 2)
    idcg = 3 / 1 + 1 / 1.584962500721156
    assert scores["ndcg"] == pytest.approx(dcg / idcg)


def test_grade_zero_units_are_reviewed_but_not_relevant():
    units = [LabeledUnit(doc_id="a", grade=0), LabeledUnit(doc_id="b", grade=1)]
    scores = case_metrics([item("a"), item("b")], units, 2)
    assert scores["recall"] == 1.0 and scores["mrr"] == 0.5


def cases_and_runs():
    cases = [
        Case(id="q1", relevant=[LabeledUnit(doc_id="a")], split="dev", tags=["hr"],
             claims=[Claim(text="five days", evidence=["a"]), Claim(text="also b", evidence=["a", "b"])]),
        Case(id="q2", relevant=[LabeledUnit(doc_id="b", grade=2)], split="heldout", tags=["hr", "leak"]),
        Case(id="q3", expected="abstain", split="dev"),
        Case(id="q4", expected="abstain", split="heldout"),
        Case(id="q5", relevant=[LabeledUnit(doc_id="c")], split="dev"),
    ]
    runs = [RunEntry(case_id="q1", retrieved=[item("x"), item("a")]),
            RunEntry(case_id="q2", retrieved=[item("b")]),
            RunEntry(case_id="q3", abstained=True),
            RunEntry(case_id="q4", retrieved=[item("z")]),
            RunEntry(case_id="q5", retrieved=[item("c")], abstained=True)]
    return cases, runs


def test_report_overall_per_split_and_per_tag():
    report = evaluate(*cases_and_runs(), ks=[1, 2])
    overall = report["groups"]["all"]
    assert (overall["answerable"], overall["unanswerable"]) == (3, 2)
    assert overall["metrics"]["recall@1"] == pytest.approx(2 / 3)  # q2 and q5 at 1; q1 only at 2
    assert overall["metrics"]["recall@2"] == 1.0
    assert overall["metrics"]["mrr@2"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert overall["correct_abstention_rate"] == 0.5  # q3 abstained, q4 did not
    assert overall["false_abstention_rate"] == pytest.approx(1 / 3)  # q5 abstained although answerable
    assert overall["claim_evidence@1"] == 0.0 and overall["claim_evidence@2"] == 0.5
    assert report["groups"]["split:heldout"]["metrics"]["recall@1"] == 1.0
    assert report["groups"]["tag:hr"]["answerable"] == 2 and report["groups"]["tag:leak"]["answerable"] == 1
    assert list(report["groups"])[:3] == ["all", "split:dev", "split:heldout"]


def test_every_case_counts_past_one_that_cannot_be_scored():
    cases = [Case(id="q0", relevant=[LabeledUnit(doc_id="a", grade=0)]),  # answerable, nothing relevant labeled
             Case(id="q1", relevant=[LabeledUnit(doc_id="a")]), Case(id="q2", relevant=[LabeledUnit(doc_id="b")]),
             Case(id="q3", relevant=[LabeledUnit(doc_id="c")])]
    runs = [RunEntry(case_id="q1", retrieved=[item("a")], abstained=True), RunEntry(case_id="q2", abstained=True),
            RunEntry(case_id="q3", retrieved=[item("c")])]
    report = evaluate(cases, runs, ks=[1])
    assert report["k"] == [1]
    overall = report["groups"]["all"]
    assert overall["answerable"] == 3 and overall["metrics"]["recall@1"] == pytest.approx(2 / 3)
    assert overall["false_abstention_rate"] == pytest.approx(2 / 3)


def test_a_report_of_unanswerable_cases_only_has_no_ranking_figures():
    report = evaluate([Case(id="q1", expected="abstain")], [RunEntry(case_id="q1", abstained=True)], ks=[5])
    overall = report["groups"]["all"]
    assert overall["correct_abstention_rate"] == 1.0 and overall["false_abstention_rate"] is None
    assert set(overall["metrics"].values()) == {None}


def test_a_case_without_a_run_retrieved_nothing_and_is_reported():
    cases, runs = cases_and_runs()
    report = evaluate(cases, runs[1:], ks=[2])
    assert report["groups"]["all"]["missing_runs"] == 1
    assert report["groups"]["all"]["metrics"]["recall@2"] == pytest.approx(2 / 3)
    assert report["groups"]["all"]["false_abstention_rate"] == pytest.approx(1 / 3)  # q5's: a missing run is none


def test_gate_fails_under_a_floor_and_on_a_drop_from_the_baseline():
    report = evaluate(*cases_and_runs(), ks=[1, 2])
    assert gate(report, [parse_threshold("recall@2=0.9")], None, None) == []
    [failure] = gate(report, [parse_threshold("recall@1=0.8")], None, None)
    assert "recall@1 = 0.6667 is under 0.8000" in failure
    baseline = json.loads(json.dumps(report))
    baseline["groups"]["all"]["metrics"]["ndcg@1"] = 0.9
    [drop] = gate(report, [], baseline, max_drop=0.05)
    assert drop.startswith("ndcg@1 dropped")
    assert gate(report, [], baseline, max_drop=0.5) == []
    assert "not measured" in gate(report, [parse_threshold("recall@7=0.1")], None, None)[0]


def test_a_floor_on_claim_evidence_gates_on_the_claim_figure():
    report = evaluate(*cases_and_runs(), ks=[1, 2])  # claim_evidence@2 is 0.5
    assert parse_threshold("claim_evidence@2=0.4") == ("claim_evidence@2", 0.4)
    assert gate(report, [parse_threshold("claim_evidence@2=0.4")], None, None) == []
    assert gate(report, [parse_threshold("claim_evidence@2=0.6")], None, None) == [
        "claim_evidence@2 = 0.5000 is under 0.6000"]


def test_a_floor_over_an_empty_case_file_is_not_measured():
    report = evaluate([], [], ks=[5])
    assert gate(report, [parse_threshold("recall@5=0.5")], None, None) == [
        "recall@5: not measured (no answerable case, or k not evaluated)"]


def test_a_metric_at_its_floor_or_dropped_by_exactly_the_allowed_drop_passes():
    report = evaluate(*cases_and_runs(), ks=[1, 2])  # recall@2 is 1.0
    assert gate(report, [parse_threshold("recall@2=1.0")], None, None) == []
    baseline = json.loads(json.dumps(report))
    report["groups"]["all"]["metrics"]["ndcg@1"] = 0.5  # figures whose difference is exact in binary
    baseline["groups"]["all"]["metrics"]["ndcg@1"] = 0.75
    assert gate(report, [], baseline, max_drop=0.25) == []
    assert gate(report, [], baseline, max_drop=0.125) == [
        "ndcg@1 dropped 0.2500 from 0.7500 (allowed 0.1250)"]


def test_a_baseline_of_an_empty_case_file_compares_nothing():
    report = evaluate(*cases_and_runs(), ks=[1, 2])
    empty = json.loads(json.dumps(evaluate([], [], ks=[1, 2])))
    assert gate(report, [], empty, max_drop=0.0) == []


@pytest.mark.parametrize("foreign", [{}, {"groups": None}, {"metrics": {"ndcg@1": 0.9}}, [{"groups": {}}], "report"])
def test_a_baseline_that_is_not_a_report_is_refused_not_compared_to_nothing(foreign):
    report = evaluate(*cases_and_runs(), ks=[1, 2])
    refused = r"^the baseline is not a report of `ragmon eval -o json` \(it has no groups\)$"
    with pytest.raises(ValueError, match=refused):
        gate(report, [], foreign, max_drop=0.05)
    assert gate(report, [], foreign, max_drop=None) == []  # no drop asked for: the baseline is not read


def test_a_threshold_without_a_value_names_the_form_expected():
    with pytest.raises(ValueError, match=re.escape("expected [GROUP/]METRIC@K=VALUE with METRIC one of recall, "
                                                   "precision, hit, mrr, ndcg, claim_evidence")):
        parse_threshold("recall@5")
    with pytest.raises(ValueError, match="'nan' is not a finite number"):
        parse_threshold("recall@5=nan")


@pytest.mark.parametrize("text", ["recall@5", "recall=0.5", "recal@5=0.5", "recall@x=0.5", "recall@5=high"])
def test_thresholds_are_checked(text):
    with pytest.raises(ValueError, match="recall|recal"):
        parse_threshold(text)


# --- cases from conversations: follow-up turns scored apart (docs/evaluation.md) ---------------------

EARLIER = [EarlierTurn(message="How many vacation days carry over?", answer="Five."),
           EarlierTurn(message="and for part-timers?", searched=["carry over part-time"])]


def retrieved(*docs: str) -> list[RetrievedItem]:
    return [RetrievedItem(id=f"{doc}#1", doc_id=doc) for doc in docs]


def conversation_set():
    """q1 a first turn (found), q2 a follow-up with its history (missed), q3 a follow-up known by its
    turn alone (found), q4 an unanswerable follow-up (abstained)."""
    cases = [Case(id="q1", relevant=[LabeledUnit(doc_id="a")]),
             Case(id="q2", relevant=[LabeledUnit(doc_id="b")], history=EARLIER, turn=3),
             Case(id="q3", relevant=[LabeledUnit(doc_id="c")], turn=2),
             Case(id="q4", expected="abstain", history=EARLIER[:1], split="heldout")]
    runs = [RunEntry(case_id="q1", retrieved=retrieved("a")),
            RunEntry(case_id="q2", retrieved=retrieved("x", "y"), history=EARLIER),
            RunEntry(case_id="q3", retrieved=retrieved("c")),
            RunEntry(case_id="q4", abstained=True, history=EARLIER[:1])]
    return cases, runs


def test_follow_up_turns_are_scored_apart_from_first_turns():
    report = evaluate(*conversation_set(), ks=[1, 2])
    groups = report["groups"]
    assert list(groups) == ["all", "turn:first", "turn:follow-up", "split:dev", "split:heldout"]
    assert groups["all"]["metrics"]["recall@1"] == pytest.approx(2 / 3)
    assert (groups["turn:first"]["answerable"], groups["turn:first"]["metrics"]["recall@1"]) == (1, 1.0)
    follow_ups = groups["turn:follow-up"]
    assert (follow_ups["answerable"], follow_ups["unanswerable"]) == (2, 1)  # q2, q3; q4
    assert follow_ups["metrics"]["recall@2"] == 0.5 and follow_ups["correct_abstention_rate"] == 1.0
    assert groups["turn:first"]["unanswerable"] == 0


def test_a_set_without_follow_ups_reports_as_before():
    cases = [Case(id="q1", relevant=[LabeledUnit(doc_id="a")]), Case(id="q2", relevant=[LabeledUnit(doc_id="b")],
                                                                     turn=1, split="heldout")]
    report = evaluate(cases, [RunEntry(case_id="q1", retrieved=retrieved("a"))], ks=[1])
    assert list(report["groups"]) == ["all", "split:dev", "split:heldout"]


def test_a_floor_can_judge_one_group():
    assert parse_threshold("turn:follow-up/recall@5=0.6") == ("turn:follow-up/recall@5", 0.6)
    assert parse_threshold("recall@5=0.6") == ("recall@5", 0.6)
    for bad in ("/recall@5=0.6", "turn:follow-up/recal@5=0.6", "turn:follow-up/=0.6"):
        with pytest.raises(ValueError, match="GROUP/"):
            parse_threshold(bad)
    report = evaluate(*conversation_set(), ks=[1, 2])
    floors = [parse_threshold(text) for text in ("recall@2=0.6", "turn:follow-up/recall@2=0.6",
                                                 "turn:first/recall@2=1", "split:heldout/recall@2=0.1",
                                                 "turn:follow-up/claim_evidence@2=0.5")]
    assert gate(report, floors, None, None) == [
        "turn:follow-up/recall@2 = 0.5000 is under 0.6000",
        "split:heldout/recall@2: not measured (no answerable case in split:heldout, or k not evaluated)",
        "turn:follow-up/claim_evidence@2: not measured (no answerable case in turn:follow-up, or k not evaluated)"]
    assert gate(report, [("recall@3", 0.1)], None, None) == [
        "recall@3: not measured (no answerable case, or k not evaluated)"]  # the overall floor as it was


def test_a_floor_can_judge_a_group_whose_name_holds_an_equals_sign():
    cases = [Case(id="q1", relevant=[LabeledUnit(doc_id="a")], tags=["lang=de"]),
             Case(id="q2", relevant=[LabeledUnit(doc_id="b")], tags=["lang=en"])]
    report = evaluate(cases, [RunEntry(case_id="q1", retrieved=retrieved("x", "a"))], ks=[1, 2])
    assert parse_threshold("tag:lang=de/recall@2=0.9") == ("tag:lang=de/recall@2", 0.9)
    assert gate(report, [parse_threshold("tag:lang=de/recall@1=0.5"), parse_threshold("tag:lang=de/recall@2=0.9"),
                         parse_threshold("tag:lang=en/recall@2=0.5")], None, None) == [
        "tag:lang=de/recall@1 = 0.0000 is under 0.5000", "tag:lang=en/recall@2 = 0.0000 is under 0.5000"]
    with pytest.raises(ValueError, match="expected"):  # a value holding `=` is no number either way
        parse_threshold("recall@5=0.5=0.6")


def test_a_drop_in_follow_ups_fails_against_a_baseline_that_has_them():
    cases, runs = conversation_set()
    baseline = evaluate(cases, [*runs[:1], RunEntry(case_id="q2", retrieved=retrieved("b"), history=EARLIER),
                                *runs[2:]], ks=[1])
    now = evaluate(cases, runs, ks=[1])
    failures = gate(now, [], baseline, 0.4)
    assert sorted(failures) == sorted(f"turn:follow-up/{m}@1 dropped 0.5000 from 1.0000 (allowed 0.4000)"
                                      for m in ("recall", "precision", "hit", "mrr", "ndcg"))
    old = {"groups": {"all": baseline["groups"]["all"]}}  # a report from before conversations were kept
    assert gate(now, [], old, 0.4) == []


def test_files_load_and_bad_lines_are_named():
    cases = load_cases(b'{"id": "q1", "question": "?", "expected": "answer", "relevant": [{"doc_id": "c4"}],'
                       b' "claims": [{"text": "t", "evidence": ["c4"]}], "split": "dev", "reference": "kept"}\n\n')
    assert cases[0].relevant[0].grade == 1 and cases[0].claims[0].evidence == ["c4"]
    runs = load_runs(b'{"case_id": "q1", "retrieved": [{"id": "c1", "doc_id": "c1", "doc_version": "v1",'
                     b' "span": [0, 480]}], "abstained": false}\n')
    assert runs[0].retrieved[0].span == (0, 480)
    assert [case.id for case in load_cases(b'{"id": "q1"}\n\n{"id": "q2"}\n')] == ["q1", "q2"]
    with pytest.raises(ValueError, match="line 2: not a valid case"):
        load_cases(b'{"id": "q1"}\n{"id": 5}\n')
    with pytest.raises(ValueError, match="line 1: not a valid run entry"):
        load_runs(b'{"case_id": 5}\n')


def test_the_eval_command_prints_gates_and_compares(tmp_path):
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main

    cases, runs = cases_and_runs()
    (tmp_path / "cases.jsonl").write_bytes(b"\n".join(msgspec_encode(c) for c in cases))
    (tmp_path / "run.jsonl").write_bytes(b"\n".join(msgspec_encode(r) for r in runs))
    args = ["eval", "--cases", str(tmp_path / "cases.jsonl"), "--run", str(tmp_path / "run.jsonl"), "--k", "1,2"]
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "at k=2" in table.output and "split:heldout" in table.output and "tag:leak" in table.output
    as_json = CliRunner().invoke(main, [*args, "-o", "json"])
    report = json.loads(as_json.output)
    assert report["groups"]["all"]["metrics"]["recall@2"] == 1.0 and report["failures"] == []
    (tmp_path / "baseline.json").write_text(as_json.output)
    failing = CliRunner().invoke(main, [*args, "--fail-under", "recall@1=0.9"])
    assert failing.exit_code == 1 and "FAIL recall@1" in failing.output
    steady = CliRunner().invoke(main, [*args, "--baseline", str(tmp_path / "baseline.json"), "--max-drop", "0.01"])
    assert steady.exit_code == 0
    worse = [RunEntry(case_id=r.case_id, abstained=r.abstained) for r in runs]  # retrieves nothing now
    (tmp_path / "run.jsonl").write_bytes(b"\n".join(msgspec_encode(r) for r in worse))
    dropped = CliRunner().invoke(main, [*args, "--baseline", str(tmp_path / "baseline.json"), "--max-drop", "0.01"])
    assert dropped.exit_code == 1 and "dropped" in dropped.output
    (tmp_path / "cases.json").write_text(json.dumps({"cases": 3}))  # the wrong file given as the baseline
    foreign = CliRunner().invoke(main, [*args, "--baseline", str(tmp_path / "cases.json"), "--max-drop", "0.01"])
    assert foreign.exit_code == 2 and "cases.json" in foreign.output and "not a report" in foreign.output
    bad = CliRunner().invoke(main, [*args, "--fail-under", "recal@1=0.9"])
    assert bad.exit_code == 2 and "METRIC@K=VALUE" in bad.output


def msgspec_encode(value) -> bytes:
    import msgspec

    return msgspec.json.encode(value)


def test_the_eval_command_takes_exactly_one_run_source(tmp_path):
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main
    from ragmon.monitor.storage.store import make_engine, upgrade

    (tmp_path / "cases.jsonl").write_text('{"id": "q1", "relevant": [{"doc_id": "d1"}]}\n')
    (tmp_path / "run.jsonl").write_text('{"case_id": "q1", "retrieved": [{"id": "d1"}]}\n')
    cases = ["eval", "--cases", str(tmp_path / "cases.jsonl")]
    for extra in ([], ["--run", str(tmp_path / "run.jsonl"), "--run-from-store"]):
        refused = CliRunner().invoke(main, [*cases, *extra])
        assert refused.exit_code == 2 and "either --run FILE or --run-from-store" in refused.output
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
    missing = CliRunner().invoke(main, [*cases, "--run-from-store", "-o", "json"], env=env)
    assert missing.exit_code == 2 and "no ragmon database at" in missing.output  # and none was made
    assert not (tmp_path / "ragmon.db").exists()
    upgrade(make_engine(env["RAGMON_DATABASE__URL"]))  # a store with no sample
    empty = CliRunner().invoke(main, [*cases, "--run-from-store", "--write-run", str(tmp_path / "built.jsonl"),
                                      "-o", "json"], env=env)
    assert empty.exit_code == 0, empty.output
    assert "1 cases have no stored trace" in empty.output and (tmp_path / "built.jsonl").read_text() == ""
