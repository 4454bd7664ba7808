"""The Langfuse Python SDK (OpenTelemetry-based), exporting with its own span processor, answering the
plan's questions three ways:

1. LangChain with Langfuse's ``CallbackHandler`` (questions 1-3): an LCEL chain (retriever -> prompt
   -> a fake chat model -> output parser) twice, then the retriever alone. The caller is in the run
   metadata as Langfuse documents it (``langfuse_user_id``, ``langfuse_session_id``) beside the
   application's own keys (``tenant``, ``groups``, ``index``). Langfuse makes the user and session
   trace attributes (``user.id``, ``session.id``) only when a chain is the root of the run: the
   retriever alone keeps the application's keys (``langfuse.observation.metadata.*``) and loses the
   user, so ragmon sees a caller with groups and no id;
2. the application's own functions (question 4): ``@observe()`` around an
   ``@observe(as_type="retriever")`` search and an ``@observe(as_type="generation")`` stub model, the
   caller given with ``propagate_attributes(user_id=..., session_id=..., metadata=...)``;
3. LlamaIndex through Langfuse's documented integration, OpenInference's instrumentation on the same
   TracerProvider (question 5): a query engine inside an ``@observe()`` request, the caller propagated
   by Langfuse onto the OpenInference spans (``user.id``, ``langfuse.trace.metadata.*``): one trace of
   two dialects.

The export: Langfuse's span processor (a batch processor, OTLP protobuf, gzip, HTTP Basic
credentials) sends to ``LANGFUSE_BASE_URL`` + ``LANGFUSE_OTEL_TRACES_EXPORT_PATH``, here ragmon's
``/v1/traces``, and stands for the ``batch:protobuf`` server; the TracerProvider's other processors
export the same spans to the other servers.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from otel_export import EXPORTERS, PROCESSORS, Roots, arguments, document_metadata, load_plan, one_trace, report
from reported import langchain_documents as documents_of
from reported import llama_nodes as nodes_of

args = arguments()
plan = load_plan(args)
exports = dict(spec.split("=", 1) for spec in args.export)
if "batch:protobuf" not in exports:
    raise SystemExit("Langfuse's own exporter is batch:protobuf; give that export")
os.environ["LANGFUSE_BASE_URL"] = exports["batch:protobuf"]
os.environ["LANGFUSE_OTEL_TRACES_EXPORT_PATH"] = "v1/traces"
os.environ["LANGFUSE_PUBLIC_KEY"] = "pk-lf-ragmon-suite"
os.environ["LANGFUSE_SECRET_KEY"] = "sk-lf-ragmon-suite"

from langfuse import Langfuse, observe, propagate_attributes  # noqa: E402
from langfuse.langchain import CallbackHandler  # noqa: E402

tracer_provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
roots = Roots()
tracer_provider.add_span_processor(roots)
langfuse = Langfuse(tracer_provider=tracer_provider)  # adds Langfuse's span processor
for spec, url in exports.items():
    if spec != "batch:protobuf":
        processor, encoding = spec.split(":")
        tracer_provider.add_span_processor(PROCESSORS[processor](EXPORTERS[encoding](endpoint=f"{url}/v1/traces",
                                                                                      timeout=30)))

from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402

LlamaIndexInstrumentor().instrument(tracer_provider=tracer_provider)

from langchain_community.retrievers import BM25Retriever as LangChainBM25  # noqa: E402
from langchain_core.documents import Document as LangChainDocument  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402
from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.retrievers.bm25 import BM25Retriever as LlamaBM25  # noqa: E402
from llama_parts import Recorder  # noqa: E402

caller = plan["caller"]
conversation = f"{args.tenant}-conversation"
app_metadata = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}
questions: list[dict[str, Any]] = []


def asked(question: str, trace_id: str, lists: list[list[dict[str, Any]]], context: list[dict[str, Any]],
          answer: str | None, who: dict[str, Any]) -> None:
    questions.append({"trace_id": trace_id, "question": question, "caller": who, "lists": lists,
                      "context": context, "answer": answer})


# --- 1. LangChain with Langfuse's callback handler -----------------------------------------------

corpus = []
for i, d in enumerate(plan["documents"]):
    metadata = {"source": d["doc_id"]}
    if d["version"] is not None:
        metadata["doc_version"] = d["version"]
    if d["acl"] is not None:
        metadata["acl"] = d["acl"]
    if i % 2:
        metadata["page"] = i  # named source#page; the rest by their Document id
    corpus.append(LangChainDocument(page_content=d["text"], metadata=metadata,
                                    id=None if i % 2 else f"{d['doc_id']}#0"))
retriever = LangChainBM25.from_documents(corpus, k=2)
seen: list[list[LangChainDocument]] = []


def keep(documents: list[LangChainDocument]) -> list[LangChainDocument]:
    seen.append(documents)
    return documents


prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
model = FakeListChatModel(responses=["Here is what the documents say."])
chain = ({"context": retriever | RunnableLambda(keep) | (lambda docs: "\n".join(d.page_content for d in docs)),
          "question": RunnablePassthrough()} | prompt | model | StrOutputParser())
run_config = {"callbacks": [CallbackHandler()],
              "metadata": {"langfuse_user_id": caller["id"], "langfuse_session_id": conversation, **app_metadata}}


for question in plan["questions"][:2]:
    answer, trace_id = one_trace(roots, lambda q=question: chain.invoke(q, config=run_config))
    asked(question, trace_id, [documents_of(seen[-1])], documents_of(seen[-1]), answer, caller)

question = plan["questions"][2]
found, trace_id = one_trace(roots, lambda: retriever.invoke(question, config=run_config))
# Langfuse sets the user only under a chain root: this trace's caller has groups and no id
asked(question, trace_id, [documents_of(found)], documents_of(found), None, {"groups": caller["groups"]})


# --- 2. The application's own functions ----------------------------------------------------------


@observe(as_type="retriever")
def search(query: str) -> list[dict[str, Any]]:
    """The two documents sharing the most words with the query, scored by the share of its words."""
    asked_words = set(query.lower().split())
    scored = sorted(((len(asked_words & set(d["text"].lower().split())) / len(asked_words), i, d)
                     for i, d in enumerate(plan["documents"])), key=lambda s: (-s[0], s[1]))[:2]
    return [{"id": f"{d['doc_id']}#search", "content": d["text"], "score": round(score, 4),
             "metadata": {"doc_id": d["doc_id"], **({"doc_version": d["version"]} if d["version"] else {}),
                          **({"acl": d["acl"]} if d["acl"] else {})}}
            for score, _, d in scored]


@observe(as_type="generation")
def stub_model(question: str, passages: list[dict[str, Any]]) -> str:
    return f"From {len(passages)} passages: {passages[0]['content'].split('.')[0]}."


@observe()
def answer_question(question: str) -> str:
    with propagate_attributes(user_id=caller["id"], session_id=conversation, metadata=app_metadata):
        found = search(question)
        answer_question.found = found
        return stub_model(question, found)


question = plan["questions"][3]
answer, trace_id = one_trace(roots, lambda: answer_question(question))
asked(question, trace_id, [answer_question.found], answer_question.found, answer, caller)


# --- 3. LlamaIndex through OpenInference, under Langfuse -----------------------------------------


llama_corpus = []
for d in plan["documents"]:
    metadata = document_metadata(d)
    llama_corpus.append(LlamaDocument(text=d["text"], doc_id=d["doc_id"], metadata=metadata))
with langfuse.start_as_current_observation(name="ingest"):  # an ingestion run: a trace with no retrieval
    nodes = SentenceSplitter().get_nodes_from_documents(llama_corpus)
recorder = Recorder()
engine = RetrieverQueryEngine.from_args(LlamaBM25.from_defaults(nodes=nodes, similarity_top_k=2),
                                        llm=MockLLM(max_tokens=8), node_postprocessors=[recorder])


@observe()
def ask_engine(question: str) -> str:
    with propagate_attributes(user_id=caller["id"], session_id=conversation, metadata=app_metadata):
        return str(engine.query(question))


question = plan["questions"][4]
answer, trace_id = one_trace(roots, lambda: ask_engine(question))
asked(question, trace_id, [nodes_of(recorder.seen[-1])], nodes_of(recorder.seen[-1]), answer, caller)
langfuse.flush()
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 1})
