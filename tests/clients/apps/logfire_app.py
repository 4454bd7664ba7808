"""Logfire (pydantic), configured to export to an OpenTelemetry backend instead of Logfire's own
(``send_to_logfire=False``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), answering the plan's questions
three ways:

1. LlamaIndex through OpenInference's instrumentation on Logfire's TracerProvider (Logfire's
   documented LlamaIndex integration), a BM25 retriever inside an ``@logfire.instrument`` function
   (questions 1-2). The request's attributes reach every span through ``logfire.set_baggage``:
   ``user.id``, ``ragmon.caller.groups`` and a ``metadata`` object (tenant, index) as JSON text, and
   ``session.id``, which Logfire scrubs (``[Scrubbed due to 'session']``): ragmon sees no conversation;
2. the same with a query engine (questions 3-4), the conversation in ``gen_ai.conversation.id``,
   which Logfire does not scrub, the answer recorded by ``record_return=True``;
3. a ``logfire.span`` carrying OTel GenAI retrieval attributes that the application sets around its
   own keyword search (question 5): a Logfire span read as GenAI.

The export: Logfire adds a batch span processor with the OTLP/HTTP protobuf exporter when
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; it stands for the ``batch:protobuf`` server, and
``additional_span_processors`` export the same spans to the other servers (scrubbed alike).
"""

from __future__ import annotations

import json
import os
from typing import Any

from otel_export import EXPORTERS, PROCESSORS, Roots, arguments, document_metadata, load_plan, one_trace, report
from reported import llama_nodes as nodes_of

args = arguments()
plan = load_plan(args)
exports = dict(spec.split("=", 1) for spec in args.export)
if "batch:protobuf" not in exports:
    raise SystemExit("Logfire's own OTLP exporter is batch:protobuf; give that export")
os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{exports['batch:protobuf']}/v1/traces"

import logfire  # noqa: E402

roots = Roots()
others = [PROCESSORS[spec.split(":")[0]](EXPORTERS[spec.split(":")[1]](endpoint=f"{url}/v1/traces", timeout=30))
          for spec, url in exports.items() if spec != "batch:protobuf"]
logfire.configure(send_to_logfire=False, console=False, service_name="rag-app",
                  additional_span_processors=[roots, *others])
tracer_provider = logfire.DEFAULT_LOGFIRE_INSTANCE.config.get_tracer_provider()

from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402

LlamaIndexInstrumentor().instrument(tracer_provider=tracer_provider)

from llama_index.core import Document  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeWithScore  # noqa: E402
from llama_index.retrievers.bm25 import BM25Retriever  # noqa: E402
from llama_parts import Recorder  # noqa: E402

caller = plan["caller"]
conversation = f"{args.tenant}-conversation"
request = {"user.id": caller["id"], "ragmon.caller.groups": json.dumps(caller["groups"]),
           "metadata": json.dumps({"tenant": args.tenant, "index": plan["index"]})}
questions: list[dict[str, Any]] = []


def asked(question: str, trace_id: str, lists: list[list[dict[str, Any]]], context: list[dict[str, Any]],
          answer: str | None, conversation_kept: bool) -> None:
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": lists,
                      "context": context, "answer": answer, "conversation_kept": conversation_kept})


corpus = []
for d in plan["documents"]:
    metadata = document_metadata(d)
    corpus.append(Document(text=d["text"], doc_id=d["doc_id"], metadata=metadata))
nodes = SentenceSplitter().get_nodes_from_documents(corpus)  # an ingestion run: a trace with no retrieval
retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=2)
recorder = Recorder()
engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8), node_postprocessors=[recorder])


@logfire.instrument("retrieve for {question}")
def retrieve_for(question: str) -> list[NodeWithScore]:
    return retriever.retrieve(question)


@logfire.instrument("answer {question}", record_return=True)
def answer(question: str) -> str:
    return str(engine.query(question))


for question in plan["questions"][:2]:
    def call(q=question):
        with logfire.set_baggage(**request, **{"session.id": conversation}):  # scrubbed by Logfire
            return retrieve_for(q)
    found, trace_id = one_trace(roots, call)
    asked(question, trace_id, [nodes_of(found)], nodes_of(found), None, False)

for question in plan["questions"][2:4]:
    def call(q=question):
        with logfire.set_baggage(**request, **{"gen_ai.conversation.id": conversation}):
            return answer(q)
    response, trace_id = one_trace(roots, call)
    asked(question, trace_id, [nodes_of(recorder.seen[-1])], nodes_of(recorder.seen[-1]), response, True)


def search(question: str) -> list[dict[str, Any]]:
    """The two documents sharing the most words with the question, scored by the share of its words."""
    words = set(question.lower().split())
    scored = sorted(((len(words & set(d["text"].lower().split())) / len(words), i, d)
                     for i, d in enumerate(plan["documents"])), key=lambda s: (-s[0], s[1]))[:2]
    return [{"id": f"{d['doc_id']}#search", "content": d["text"], "score": round(score, 4),
             "metadata": {"doc_id": d["doc_id"], **({"doc_version": d["version"]} if d["version"] else {}),
                          **({"acl": d["acl"]} if d["acl"] else {})}}
            for score, _, d in scored]


@logfire.instrument("answer {question}", record_return=True)
def answer_by_hand(question: str) -> str:
    with logfire.span("retrieval {index}", index=plan["index"], **{
            "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": plan["index"],
            "gen_ai.retrieval.query.text": question}) as span:
        found = search(question)
        span.set_attribute("gen_ai.retrieval.documents", found)  # a list of objects: JSON text
    answer_by_hand.found = found
    return f"From {len(found)} passages: {found[0]['content'].split('.')[0]}."


question = plan["questions"][4]


def by_hand():
    with logfire.set_baggage(**request, **{"gen_ai.conversation.id": conversation}):
        return answer_by_hand(question)


response, trace_id = one_trace(roots, by_hand)
asked(question, trace_id, [answer_by_hand.found], answer_by_hand.found, response, True)
logfire.force_flush()
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 1})
