"""The weekly batch for labeling (SPEC §5): cases in the test-set schema with empty labels, and the
same cases as Label Studio tasks with a labeling config that grades each passage 0/1/2 and marks
the question answerable or not, with a reference answer.

Everything here is built from stored samples, which are redacted already.
"""

from __future__ import annotations

from typing import Any

LABEL_CONFIG = """<View>
  <Header value="Question"/>
  <Text name="question" value="$question"/>
  <Header value="What the system answered"/>
  <Text name="answer" value="$answer"/>
  <Header value="Grade each passage: 0 irrelevant, 1 partly relevant, 2 answers the question"/>
  <Repeater on="$passages" indexFlag="{{idx}}">
    <Text name="passage_{{idx}}" value="$passages[{{idx}}].text"/>
    <Choices name="grade_{{idx}}" toName="passage_{{idx}}" choice="single" showInline="true" required="true">
      <Choice value="0"/>
      <Choice value="1"/>
      <Choice value="2"/>
    </Choices>
  </Repeater>
  <Header value="Can the question be answered from the corpus?"/>
  <Choices name="answerable" toName="question" choice="single" showInline="true" required="true">
    <Choice value="answerable"/>
    <Choice value="unanswerable"/>
  </Choices>
  <Header value="Reference answer (when answerable)"/>
  <TextArea name="reference_answer" toName="question" rows="3" maxSubmissions="1"/>
</View>
"""


def candidates(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The distinct passages a labeler grades: the context first, then the other candidates, each
    once, with what locates it in its source (document, version, span)."""
    lists = [trace.get("context") or []] + [r.get("passages") or [] for r in trace.get("retrievals") or []]
    seen: dict[str, dict[str, Any]] = {}
    for passages in lists:
        for passage in passages:
            known = seen.setdefault(passage["id"], {"id": passage["id"]})
            for key in ("doc_id", "doc_version", "span", "text"):
                if passage.get(key) is not None and known.get(key) is None:
                    known[key] = passage[key]
    return list(seen.values())


def case_of(sample) -> dict[str, Any]:
    """A regression case with empty labels, from a stored sample."""
    trace = sample.payload
    return {
        "id": sample.trace_id,
        "question": trace.get("query", ""),
        "tenant": sample.tenant,
        "caller_groups": (trace.get("caller") or {}).get("groups", []),
        "corpus": {"index": trace["index"]["name"], "version": trace["index"].get("version")},
        "expected": None,
        "relevant": [],
        "reference_answer": None,
        "claims": [],
        "tags": sorted(sample.strata),
        "split": sample.split,
        "origin": {"trace_id": sample.trace_id, "week": sample.week},
        "candidates": candidates(trace),
    }


def task_of(sample) -> dict[str, Any]:
    """A Label Studio task for the labeling config above."""
    trace = sample.payload
    passages = [{"idx": i, "text": p.get("text") or f"({p['id']}: no text recorded)", "id": p["id"],
                 "doc_id": p.get("doc_id"), "doc_version": p.get("doc_version"), "span": p.get("span")}
                for i, p in enumerate(candidates(trace))]
    answer = (trace.get("answer") or {}).get("text") or "(no answer recorded)"
    return {"data": {"case_id": sample.trace_id, "question": trace.get("query", ""), "answer": answer,
                     "passages": passages, "tenant": sample.tenant, "week": sample.week,
                     "strata": sorted(sample.strata)}}
