"""The passage fields a document's metadata carries: each in its native type, or named as of the
wrong kind (the forms ragmon's emitter writes are taken without a check's call: the same answers)."""

import pytest

from ragmon.collectors.span_reading import make_document, passage_fields

NOVEMBER = 1_794_476_614.805  # 2026-11-12T09:43:34.805Z


@pytest.mark.parametrize(("field", "value", "taken"), [
    ("doc_id", "leave", "leave"),
    ("doc_id", 7, "7"),
    ("doc_id", "", None),
    ("doc_id", True, None),
    ("doc_version", 1.5, None),
    ("embedding_model", ["e5"], None),
    ("span", [1920, 2400], [1920, 2400]),
    ("span", [5, 5], [5, 5]),
    ("span", (0, 3), [0, 3]),
    ("span", "[0, 3]", [0, 3]),
    ("span", [2400, 1920], None),
    ("span", [-1, 3], None),
    ("span", [True, 3], None),
    ("span", [1.0, 3], None),
    ("span", [1, 2, 3], None),
    ("acl", ["tenant:acme", "group:a"], ["tenant:acme", "group:a"]),
    ("acl", [], []),
    ("acl", ("group:a",), ["group:a"]),
    ("acl", "group:a, group:b", ["group:a", "group:b"]),
    ("acl", '["group:a"]', ["group:a"]),
    ("acl", ["group:a", 7], None),
    ("acl", 7, None),
    ("indexed_at", "2026-11-12T09:43:34.805Z", NOVEMBER),
    ("indexed_at", NOVEMBER, NOVEMBER),
    ("indexed_at", 1_794_476_614, 1_794_476_614.0),
    ("source_modified_at", "2026-11-12T09:43:34.805", None),  # no offset
    ("source_modified_at", "yesterday", None),
    ("source_modified_at", -5.0, None),
    ("source_modified_at", float("nan"), None),
    ("source_modified_at", float("inf"), None),
    ("source_modified_at", False, None),
])
def test_each_passage_field_is_taken_in_its_native_type_or_named_wrong(field, value, taken):
    fields, wrong = passage_fields({field: value, "other": "kept out"})
    if taken is None:
        assert (fields, wrong) == ({}, [field])
    else:
        assert (fields, wrong) == ({field: taken}, [])
        assert type(fields[field]) is type(taken)


def test_a_field_set_to_null_is_neither_taken_nor_wrong():
    assert passage_fields({"acl": None, "doc_id": "d"}) == ({"doc_id": "d"}, [])


def test_a_time_written_again_reads_the_same():
    once = passage_fields({"indexed_at": "2026-11-12T09:43:34.805Z"})
    assert passage_fields({"indexed_at": "2026-11-12T09:43:34.805Z"}) == once == ({"indexed_at": NOVEMBER}, [])


def test_a_document_names_each_field_of_the_wrong_kind_in_its_metadata():
    problems: list[tuple[str, str]] = []
    document = make_document("d#1", "0.5", "text", '{"doc_id": "d", "span": [9, 1], "acl": 7}', "w", problems)
    assert (document.id, document.score, document.content, document.fields) == ("d#1", 0.5, "text", {"doc_id": "d"})
    assert sorted(problems) == [("document.metadata", "`w.metadata`: `acl` has a value of the wrong kind"),
                                ("document.metadata", "`w.metadata`: `span` has a value of the wrong kind")]


def test_a_metadata_text_read_again_gives_the_same_document_and_problems_each_time():
    text = '{"doc_id": "d", "doc_version": "v2", "span": [9, 1], "indexed_at": "2026-11-12T09:43:34.805Z"}'
    first: list[tuple[str, str]] = []
    second: list[tuple[str, str]] = []
    one = make_document("d#1", 0.5, "text", text, "a", first)
    two = make_document("d#1", 0.5, "text", text, "b", second)
    assert one == two
    assert one.fields == {"doc_id": "d", "doc_version": "v2", "indexed_at": NOVEMBER}
    assert first == [("document.metadata", "`a.metadata`: `span` has a value of the wrong kind")]
    assert second == [("document.metadata", "`b.metadata`: `span` has a value of the wrong kind")]
    # each document's metadata and fields are its own: changing one leaves the next reading as it was
    one.metadata.pop("doc_id")
    one.fields["doc_id"] = "changed"
    three = make_document("d#1", 0.5, "text", text, "c", [])
    assert three.metadata["doc_id"] == "d" and three.fields["doc_id"] == "d"


@pytest.mark.parametrize("text", ["[1, 2]", "not json", '"a string"'])
def test_a_metadata_text_that_is_no_object_is_named_every_time(text):
    for where in ("a", "b"):
        problems: list[tuple[str, str]] = []
        document = make_document("d#1", None, None, text, where, problems)
        assert (document.metadata, document.fields) == ({}, {})
        assert problems == [("document.metadata", f"`{where}.metadata` is not a JSON object")]


def test_a_long_metadata_text_is_read_as_a_short_one():
    long_text = '{"doc_id": "d", "note": "' + "x" * 2000 + '"}'
    problems: list[tuple[str, str]] = []
    document = make_document("d#1", None, None, long_text, "w", problems)
    assert document.fields == {"doc_id": "d"} and document.metadata["note"] == "x" * 2000 and problems == []
