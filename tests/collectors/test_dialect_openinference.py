"""The OpenInference dialect on the span shapes its instrumentations write (openinference-instrumentation
-llama-index 4.6, -langchain 0.1.80, -haystack 0.1.46): the order of many documents, the span kind in
any case, the names of rerankers and retrievers, the question a reranker was asked, and what a
generation span whose output messages are hidden answers."""

from __future__ import annotations

import json

from ragmon.collectors.dialects import Dialects, openinference
from ragmon.collectors.otlp_wire import Span
from ragmon.collectors.span_mapping import SpanMapper

T = "c" * 32
MS = 1_000_000
JSON = "application/json"
SCOPE = "openinference.instrumentation.llama_index"


def span(span_id: int, parent: int | None, name: str, start: int, end: int, **attributes) -> Span:
    return Span(T, f"{span_id:016x}", f"{parent:016x}" if parent is not None else "", name, start * MS, end * MS,
                {k.replace("__", "."): v for k, v in attributes.items()}, scope=SCOPE)


def flattened(prefix: str, documents: list[dict]) -> dict:
    """Documents as the instrumentations flatten them: ``<prefix>.<n>.document.<field>``."""
    return {f"{prefix}.{n}.document.{field}": value
            for n, document in enumerate(documents) for field, value in document.items()}


def with_documents(s: Span, prefix: str, documents: list[dict]) -> Span:
    s.attributes.update(flattened(prefix, documents))
    return s


def ids(event) -> list[list[str]]:
    return [[p["id"] for p in r["passages"]] for r in event["retrievals"]]


def test_a_retrievers_eleventh_and_later_documents_keep_their_rank():
    # a top-k of 12: the attributes' numbers sort as numbers (10 and 11 after 9), not as text
    found = [{"id": f"node-{n}", "score": round(1 - n / 20, 2), "content": f"passage {n}"} for n in range(12)]
    retriever = with_documents(span(1, None, "VectorIndexRetriever.retrieve", 0, 10,
                                    openinference__span__kind="RETRIEVER", input__value="how many days?"),
                               "retrieval.documents", found)
    event = SpanMapper().map([retriever]).event
    assert ids(event) == [[d["id"] for d in found]]
    assert [p["score"] for p in event["retrievals"][0]["passages"]] == [d["score"] for d in found]


def test_documents_are_read_alike_once_the_memory_of_attribute_keys_is_full():
    # the split of each document attribute key is remembered up to a bound (the keys are the
    # sender's): a span of more documents than that is read in full all the same, twice alike
    found = [{"id": f"node-{n}", "score": 0.5, "content": f"passage {n}"} for n in range(openinference.MAX_CACHED_KEYS)]

    def read() -> list[str]:
        retriever = with_documents(span(1, None, "VectorIndexRetriever.retrieve", 0, 10,
                                        openinference__span__kind="RETRIEVER", input__value="how many days?"),
                                   "retrieval.documents", found)
        return ids(SpanMapper().map([retriever]).event)[0]

    assert read() == read() == [d["id"] for d in found]
    assert all(len(keys) <= openinference.MAX_CACHED_KEYS for keys in openinference._KEY_PARTS.values())


def test_a_long_attribute_key_is_read_but_not_remembered(monkeypatch):
    # a sender's key of any length would otherwise stay in memory: only short keys are remembered
    monkeypatch.setitem(openinference._KEY_PARTS, "retrieval.documents", {})  # room left, whatever ran before
    long_key = "retrieval.documents.0.document.metadata." + "x" * openinference.MAX_CACHED_KEY_LENGTH
    retriever = with_documents(span(1, None, "VectorIndexRetriever.retrieve", 0, 10,
                                    openinference__span__kind="RETRIEVER", input__value="how many days?"),
                               "retrieval.documents", [{"id": "node-0", "score": 0.5}, {"id": "node-1", "score": 0.4}])
    retriever.attributes[long_key] = "a value"
    assert ids(SpanMapper().map([retriever]).event) == [["node-0", "node-1"]]
    assert all(len(key) <= openinference.MAX_CACHED_KEY_LENGTH
               for keys in openinference._KEY_PARTS.values() for key in keys)


def test_the_span_kind_is_read_in_any_case():
    # OpenInference's tracer API takes the kinds in lower case ("retriever") and its own GenAI
    # conversion reads the attribute case-blind; an application setting it by hand may write either
    dialects = Dialects()
    lower = with_documents(span(1, None, "search", 0, 10, openinference__span__kind="retriever"),
                           "retrieval.documents", [{"id": "a"}, {"id": "b"}])
    reading = dialects.read(lower)
    assert (reading.kind, [d.id for d in reading.documents]) == ("retriever", ["a", "b"])
    mixed = with_documents(span(2, None, "rerank", 0, 10, openinference__span__kind="Reranker"),
                           "reranker.output_documents", [{"id": "b", "score": 0.9}])
    reading = dialects.read(mixed)
    assert (reading.kind, [(d.id, d.score) for d in reading.documents]) == ("reranker", [("b", 0.9)])
    assert dialects.read(span(3, None, "step", 0, 1, openinference__span__kind="chain")).kind is None


def test_values_and_keys_no_instrumentation_writes_are_no_list_and_no_error():
    """A sender's odd attributes are ignored, never an exception in the receiver."""
    dialects = Dialects()
    # a span kind sent as an array (OTLP's arrayValue arrives as a list)
    listed = with_documents(span(1, None, "search", 0, 10, openinference__span__kind=["RETRIEVER"]),
                            "retrieval.documents", [{"id": "a"}])
    assert dialects.read(listed).kind is None
    # keys under the documents' prefix that are not <n>.document.<field>
    stray = with_documents(span(2, None, "search", 0, 10, openinference__span__kind="RETRIEVER"),
                           "retrieval.documents", [{"id": "a"}, {"id": "b"}])
    stray.attributes.update({"retrieval.documents.first.document.id": "x", "retrieval.documents.5": "y"})
    reading = dialects.read(stray)
    assert [d.id for d in reading.documents] == ["a", "b"] and reading.problems == []
    # a retriever reporting content only, whose JSON output is the application's own object: no
    # LangChain documents to take ids from, so the passages are named by their content
    own = with_documents(span(3, None, "search", 0, 10, openinference__span__kind="RETRIEVER",
                              output__mime_type=JSON, output__value=json.dumps({"hits": 2})),
                         "retrieval.documents", [{"content": "five days"}, {"content": "payroll"}])
    [passages] = ids(SpanMapper().map([own]).event)
    assert len(passages) == 2 and all(p.startswith("sha:") for p in passages)


def test_a_reranker_without_a_model_name_is_named_by_its_span_and_a_retriever_likewise():
    def ranker(name: str, **attributes) -> Span:
        return with_documents(span(2, 1, name, 11, 20, openinference__span__kind="RERANKER", **attributes),
                              "reranker.output_documents", [{"id": "b", "score": 0.9}])

    def names(*spans) -> list[str]:
        found = with_documents(span(1, None, "InMemoryBM25Retriever.run", 0, 10, openinference__span__kind="RETRIEVER"),
                               "retrieval.documents", [{"id": "a"}, {"id": "b"}])
        return [r["retriever"] for r in SpanMapper().map([found, *spans]).event["retrievals"]]

    # Haystack: a ranker without a model (LostInTheMiddleRanker) writes no reranker.model_name
    assert names(ranker("LostInTheMiddleRanker.run")) == ["InMemoryBM25Retriever", "LostInTheMiddleRanker"]
    # LlamaIndex: a node postprocessor dispatching ReRankStartEvent(model_name="") writes it empty
    assert names(ranker("KeywordOverlapRerank.postprocess_nodes", reranker__model_name="")) == [
        "InMemoryBM25Retriever", "KeywordOverlapRerank"]
    assert names(ranker("CohereRerank.postprocess_nodes", reranker__model_name="rerank-v3.5"))[1] == "rerank-v3.5"
    # neither a model nor a span name: still a label
    assert names(ranker(""))[1] == "reranker"
    # LangChain: a retriever class named Retriever has the empty ls_retriever_name ("Retriever" less
    # its suffix): the span name is the label
    langchain = with_documents(span(1, None, "Retriever", 0, 10, openinference__span__kind="RETRIEVER",
                                    metadata='{"ls_retriever_name": ""}'),
                               "retrieval.documents", [{"id": "a"}])
    assert SpanMapper().map([langchain]).event["retrievals"][0]["retriever"] == "Retriever"


def test_a_reranking_span_says_what_it_searched_by_its_reranker_query():
    # LlamaIndex's callback handler writes no input.value on a RERANKING span, only reranker.query;
    # a chat engine that condensed the message searched and reranked the condensed question
    condensed = "How many vacation days do contractors get?"
    root = span(1, None, "chat", 0, 100, openinference__span__kind="CHAIN", input__value="And contractors?")
    found = with_documents(span(2, 1, "retrieve", 10, 20, openinference__span__kind="RETRIEVER",
                                input__value=condensed),
                           "retrieval.documents", [{"id": "a", "score": 0.4}, {"id": "b", "score": 0.3}])
    reranked = with_documents(span(3, 1, "reranking", 21, 30, openinference__span__kind="RERANKER",
                                   reranker__query=condensed, reranker__top_k=1,
                                   reranker__model_name="cross-encoder/ms-marco-MiniLM-L-2-v2"),
                              "reranker.output_documents", [{"id": "b", "score": 0.8}])
    event = SpanMapper().map([root, found, reranked]).event
    assert event["query"] == "And contractors?"
    assert [r.get("query") for r in event["retrievals"]] == [condensed, condensed]


def test_a_generation_whose_output_messages_are_hidden_gives_no_answer_from_its_json_output():
    # Haystack with OPENINFERENCE_HIDE_OUTPUT_MESSAGES: the generator's span keeps its JSON
    # output.value ({"replies": ..., "meta": ...}), which is not the answer's text
    root = span(1, None, "Pipeline.run", 0, 50, openinference__span__kind="CHAIN", input__mime_type=JSON,
                input__value='{"data": {"retriever": {"query": "q"}}}', output__mime_type=JSON,
                output__value='{"llm": {"replies": ["x"]}}')
    found = with_documents(span(2, 1, "InMemoryBM25Retriever.run", 1, 10, openinference__span__kind="RETRIEVER"),
                           "retrieval.documents", [{"id": "d"}])
    generator = span(3, 1, "OpenAIGenerator.run", 13, 20, openinference__span__kind="LLM",
                     llm__model_name="gpt-4o-mini",
                     output__mime_type=JSON, output__value=json.dumps({"replies": ["Use the reset link."],
                                                                      "meta": [{"model": "gpt-4o-mini"}]}))
    assert "answer" not in SpanMapper().map([root, found, generator]).event
    # its plain-text output is (LlamaIndex's LLM spans write the completion so)
    plain = span(3, 1, "OpenAI.complete", 13, 20, openinference__span__kind="LLM", llm__model_name="gpt-4o-mini",
                 output__value="Use the reset link.")
    assert SpanMapper().map([root, found, plain]).event["answer"]["text"] == "Use the reset link."


def test_an_empty_output_is_no_answer():
    # LangChain: an LCEL chain ending in StrOutputParser on an empty model reply; the tracer writes
    # the one string output as it is: output.value "" (no MIME type)
    root = span(1, None, "RunnableSequence", 0, 50, openinference__span__kind="CHAIN", input__value="how many days?",
                output__value="")
    found = with_documents(span(2, 1, "BM25Retriever", 1, 10, openinference__span__kind="RETRIEVER",
                                input__value="how many days?"), "retrieval.documents", [{"id": "a"}])
    model = span(3, 1, "ChatOpenAI", 11, 40, openinference__span__kind="LLM", llm__model_name="gpt-4o-mini",
                 llm__output_messages__0__message__role="assistant", llm__output_messages__0__message__content="")
    event = SpanMapper().map([root, found, model]).event
    assert event["query"] == "how many days?" and "answer" not in event


# What OpenInference's TraceConfig.mask writes when the application hides values
# (openinference-instrumentation 0.1.x, openinference/instrumentation/config.py: REDACTED_VALUE and
# TraceConfig.mask): the attribute kept with the value "__REDACTED__", or dropped.
HIDDEN = "__REDACTED__"


def test_hidden_inputs_are_no_question():
    # OPENINFERENCE_HIDE_INPUTS: input.value is "__REDACTED__" and input.mime_type dropped on every
    # span, reranker.query is "__REDACTED__", reranker.input_documents and llm.input_messages dropped
    root = span(1, None, "RetrieverQueryEngine.query", 0, 100, openinference__span__kind="CHAIN",
                input__value=HIDDEN, output__value="Five days.")
    found = with_documents(span(2, 1, "VectorIndexRetriever.retrieve", 10, 20, openinference__span__kind="RETRIEVER",
                                input__value=HIDDEN),
                           "retrieval.documents", [{"id": "a", "score": 0.4, "content": "leave: five days"},
                                                   {"id": "b", "score": 0.3, "content": "payroll"}])
    reranked = with_documents(span(3, 1, "reranking", 21, 30, openinference__span__kind="RERANKER",
                                   reranker__query=HIDDEN, reranker__top_k=1, reranker__model_name="m"),
                              "reranker.output_documents", [{"id": "a", "score": 0.8, "content": "leave: five days"}])
    event = SpanMapper().map([root, found, reranked]).event
    assert event["query"] == ""  # as for a trace that carries no question
    assert [r.get("query") for r in event["retrievals"]] == [None, None]
    assert ids(event) == [["a", "b"], ["a"]] and event["answer"]["text"] == "Five days."
    dialect = Dialects().by_scope(SCOPE)
    assert dialect.root_question(root) is None and dialect.list_question(reranked) is None


def test_hidden_outputs_are_no_answer_and_hidden_content_names_no_passage():
    # OPENINFERENCE_HIDE_OUTPUTS: output.value is "__REDACTED__" and output.mime_type dropped on every
    # span; each retrieval document's content and metadata are "__REDACTED__"; llm.output_messages and
    # reranker.output_documents are dropped
    root = span(1, None, "RunnableSequence", 0, 100, openinference__span__kind="CHAIN",
                input__value="how many days?", output__value=HIDDEN)
    hidden = {"content": HIDDEN, "metadata": HIDDEN}
    found = with_documents(span(2, 1, "VectorStoreRetriever", 10, 20, openinference__span__kind="RETRIEVER",
                                input__value="how many days?", output__value=HIDDEN),
                           "retrieval.documents", [{"id": "leave#4", "score": 0.4, **hidden},
                                                   {"score": 0.3, **hidden}, {"score": 0.2, **hidden}])
    model = span(3, 1, "ChatOpenAI", 30, 90, openinference__span__kind="LLM", llm__model_name="gpt-4o-mini",
                 output__value=HIDDEN)
    reading = Dialects().read(found)
    assert [(d.id, d.content, d.metadata) for d in reading.documents] == [("leave#4", None, {}), (None, None, {}),
                                                                          (None, None, {})]
    assert reading.problems == []  # a hidden metadata is no malformed one
    mapped = SpanMapper().map([root, found, model])
    # the two content-only passages are not named: hidden content would give them one and the same id
    assert ids(mapped.event) == [["leave#4"]] and "text" not in mapped.event["retrievals"][0]["passages"][0]
    assert mapped.unmapped == 2 and not mapped.derived
    # neither the chain's nor the model's hidden output is an answer: the outcome is unknown, not answered
    assert "answer" not in mapped.event and mapped.event["query"] == "how many days?"


def test_hidden_retrieval_documents_leave_ids_and_unnamed_passages():
    # OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS: only the documents' content and metadata are hidden
    found = with_documents(span(1, None, "BM25Retriever.retrieve", 0, 10, openinference__span__kind="RETRIEVER",
                                input__value="how many days?"),
                           "retrieval.documents", [{"id": "node-1", "score": 2.0, "content": HIDDEN,
                                                    "metadata": HIDDEN}, {"content": HIDDEN}])
    mapped = SpanMapper().map([found])
    assert ids(mapped.event) == [["node-1"]] and mapped.unmapped == 1
    assert mapped.event["query"] == "how many days?"


def test_a_generation_whose_output_text_is_hidden_answers_by_its_output_value():
    # OPENINFERENCE_HIDE_OUTPUT_TEXT: the output message's content is "__REDACTED__", output.value kept
    root = span(1, None, "chat", 0, 100, openinference__span__kind="CHAIN", input__value="how many days?")
    found = with_documents(span(2, 1, "retrieve", 1, 10, openinference__span__kind="RETRIEVER"),
                           "retrieval.documents", [{"id": "a"}])

    def model(**attributes) -> Span:
        return span(3, 1, "OpenAI.complete", 11, 90, openinference__span__kind="LLM", llm__model_name="gpt-4o-mini",
                    llm__output_messages__0__message__role="assistant", **attributes)

    shown = model(llm__output_messages__0__message__content=HIDDEN, output__value="Five days.")
    assert SpanMapper().map([root, found, shown]).event["answer"]["text"] == "Five days."
    # both hidden (HIDE_OUTPUT_TEXT with HIDE_OUTPUTS' output.value): no answer
    hidden = model(llm__output_messages__0__message__content=HIDDEN, output__value=HIDDEN)
    assert "answer" not in SpanMapper().map([root, found, hidden]).event
