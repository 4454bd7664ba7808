"""The Label Studio client against a real Label Studio: both kinds of token, the labeling config
and tasks validated by Label Studio itself, imports done once per case."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from ragmon.exporters.label_studio import LabelStudio, LabelStudioError, is_personal_access_token
from ragmon.monitor.labeling.batch import LABEL_CONFIG, task_of
from ragmon.monitor.labeling.sample_store import Sample

pytestmark = pytest.mark.integration


def task(case_id: str, passages: int = 2) -> dict:
    return {"data": {"case_id": case_id, "question": "What is the refund window?", "answer": "30 days.",
                     "passages": [{"idx": i, "id": f"p{i}", "text": f"passage {i}"} for i in range(passages)],
                     "case": {"id": case_id}, "history": [], "searched": [], "history_shown": [],
                     "searched_shown": "(the message as typed)"}}


def title() -> str:
    return f"ragmon test {uuid.uuid4().hex[:8]}"


def test_a_personal_access_token_creates_the_project_and_imports_each_case_once(label_studio):
    token = label_studio.personal_access_token()
    assert is_personal_access_token(token)
    with LabelStudio(label_studio.url, token) as studio:
        name = title()
        project_id, created = studio.ensure_project(name, LABEL_CONFIG)
        assert created
        assert studio.ensure_project(name, LABEL_CONFIG) == (project_id, False)  # found by title, reused
        assert studio.import_tasks(project_id, [task("a"), task("b", 3)]) == 2
        assert studio.import_tasks(project_id, [task("a"), task("b", 3), task("c", 1)]) == 1
        exported = studio.export(project_id)
        assert sorted(t["data"]["case_id"] for t in exported) == ["a", "b", "c"]
        assert studio.find_project(f"{name} (other)") is None


def test_label_studio_validates_the_config_and_each_task_against_it(label_studio):
    with LabelStudio(label_studio.url, label_studio.personal_access_token()) as studio:
        broken = LABEL_CONFIG.replace('toName="passage_{{idx}}"', 'toName="nowhere"')
        with pytest.raises(LabelStudioError, match="POST /api/projects: HTTP 400"):
            studio.ensure_project(title(), broken)
        project_id, _ = studio.ensure_project(title(), LABEL_CONFIG)
        unfit = {"data": {"case_id": "x", "question": "q", "history_shown": [],  # no answer, no passages
                          "searched_shown": "(the message as typed)"}}
        with pytest.raises(LabelStudioError, match=r"import: HTTP 400.*answer"):
            studio.import_tasks(project_id, [unfit])
        assert studio.export(project_id) == []


def test_an_expired_access_token_is_renewed(label_studio):
    with LabelStudio(label_studio.url, label_studio.personal_access_token()) as studio:
        studio.find_project("anything")
        header, payload, _ = studio._access.split(".")
        studio._access = f"{header}.{payload}.{base64.urlsafe_b64encode(b'forged').decode().rstrip('=')}"
        assert studio.find_project("anything") is None  # 401, renewed, retried


def test_legacy_tokens_are_refused_with_an_explanation_until_the_organization_allows_them(label_studio):
    with LabelStudio(label_studio.url, label_studio.legacy_token) as studio:
        with pytest.raises(LabelStudioError, match="legacy tokens disabled.*personal access token"):
            studio.find_project("anything")
        label_studio.set_legacy_tokens(True)
        try:
            assert studio.find_project("anything") is None
        finally:
            label_studio.set_legacy_tokens(False)


def test_a_wrong_token_and_an_unreachable_server_are_clear_errors(label_studio):
    claims = base64.urlsafe_b64encode(json.dumps({"token_type": "refresh"}).encode()).decode().rstrip("=")
    forged = f"eyJhbGciOiJIUzI1NiJ9.{claims}.c2lnbmF0dXJl"
    with LabelStudio(label_studio.url, forged) as studio, \
            pytest.raises(LabelStudioError, match="personal access token was refused"):
        studio.find_project("anything")
    with LabelStudio("http://127.0.0.1:9", "token", timeout=2) as studio, \
            pytest.raises(LabelStudioError, match="GET /api/projects: ConnectError"):
        studio.find_project("anything")


def test_a_follow_up_turns_task_with_its_earlier_turns_fits_the_labeling_config(label_studio):
    """A task built by task_of from a sample with history and searched queries is taken by Label
    Studio's own validation, and comes back with them."""
    history = [{"turn": 1, "time": 1.0, "trace_id": "t1", "message": "What is the leave policy?",
                "searched": [], "answer": "20 days a year."}]
    payload = {"trace_id": "t2", "query": "and for contractors?", "index": {"name": "handbook"}, "turn": 2,
               "retrievals": [{"retriever": "vector", "query": "leave policy for contractors",
                               "passages": [{"id": "p1", "text": "Contractors get none."}]}],
               "answer": {"text": "None."}, "history": history}
    sample = Sample(trace_id="t2", tenant="acme", week="2026-W48", strata=["conversation"], split="dev",
                    fingerprint="f", trace_time=2.0, created_at=2.0, updated_at=2.0, payload=payload)
    with LabelStudio(label_studio.url, label_studio.personal_access_token()) as studio:
        project_id, _ = studio.ensure_project(title(), LABEL_CONFIG)
        assert studio.import_tasks(project_id, [task_of(sample), task("first-turn")]) == 2
        exported = {t["data"]["case_id"]: t["data"] for t in studio.export(project_id)}
    assert exported["t2"]["history"] == history
    assert exported["t2"]["searched"] == ["leave policy for contractors"]
    assert exported["t2"]["history_shown"] == [{"message": "Turn 1, the user: What is the leave policy?",
                                                "searched": "Searched: (the message as typed)",
                                                "answer": "Answered: 20 days a year."}]
