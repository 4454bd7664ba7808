"""MLflow tracing (``mlflow-tracing``), exported with MLflow's documented OTLP settings, answering the
plan's questions three ways:

1. LlamaIndex under ``mlflow.llama_index.autolog()`` (questions 1-2): a BM25 retriever alone, which
   MLflow reports as two nested RETRIEVER spans (``retrieve`` around ``_retrieve``), then a query
   engine whose node postprocessor dispatches LlamaIndex's rerank events (MLflow marks its span
   RERANKER). LlamaIndex carries no caller: the application's own request span (``mlflow.start_span``)
   does, as ``user.id``, ``session.id`` and a ``metadata`` object (tenant, groups, index);
2. LangChain under ``mlflow.langchain.autolog()`` (questions 3-4): an LCEL chain (retriever -> prompt
   -> a fake chat model -> output parser), then the retriever alone, the caller in LangChain's run
   metadata (``user_id``, ``session_id``, ``tenant``, ``groups``, ``index``), which MLflow writes
   to every span of the run as ``metadata``;
3. an application's own functions (question 5): ``@mlflow.trace`` around a
   ``@mlflow.trace(span_type=SpanType.RETRIEVER)`` search returning ``mlflow.entities.Document``\\ s,
   the caller set on the root span with ``LiveSpan.set_attributes``.

Every MLflow attribute is JSON text (``mlflow.spanType`` is ``"RETRIEVER"`` with its quotes). MLflow's
trace metadata (``mlflow.trace.user``, ``mlflow.trace.session``) is never exported over OTLP, and
``mlflow.update_current_trace(tags=...)`` loses the root span with opentelemetry-sdk >= 1.43 (MLflow's
OTLP span processor writes the tags into the ended span, which the SDK refuses): neither is used.

The export: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (``http/protobuf``) is MLflow's own OTLP span
processor, a batch processor, and stands for the ``batch:protobuf`` server. With
``MLFLOW_USE_DEFAULT_TRACER_PROVIDER=false`` MLflow adds that processor to the application's global
TracerProvider, whose other processors export the same spans to the other servers. mlflow-tracing
3.17 needs ``sqlparse`` to resolve its default tracking URI and does not declare it
(mlflow/mlflow#18302): the suite's requirements install it.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from otel_export import EXPORTERS, PROCESSORS, Roots, arguments, document_metadata, load_plan, one_trace, report
from reported import langchain_documents as documents_of
from reported import llama_nodes as nodes_of

args = arguments()
plan = load_plan(args)
exports = dict(spec.split("=", 1) for spec in args.export)
if "batch:protobuf" not in exports:
    raise SystemExit("MLflow's own OTLP exporter is batch:protobuf; give that export")
tracer_provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
roots = Roots()
tracer_provider.add_span_processor(roots)
trace.set_tracer_provider(tracer_provider)
os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{exports['batch:protobuf']}/v1/traces"
os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
os.environ["MLFLOW_USE_DEFAULT_TRACER_PROVIDER"] = "false"

import mlflow  # noqa: E402  (configured by the environment, as MLflow reads it)
from mlflow.entities import Document as MlflowDocument  # noqa: E402
from mlflow.entities import SpanType  # noqa: E402

mlflow.tracing.enable()  # MLflow's OTLP span processor joins the global provider, before the others
for spec, url in exports.items():
    if spec != "batch:protobuf":
        processor, encoding = spec.split(":")
        tracer_provider.add_span_processor(PROCESSORS[processor](EXPORTERS[encoding](endpoint=f"{url}/v1/traces",
                                                                                      timeout=30)))
mlflow.llama_index.autolog()
mlflow.langchain.autolog()

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
from llama_parts import KeywordOverlapRerank  # noqa: E402

caller = plan["caller"]
conversation = f"{args.tenant}-conversation"
caller_metadata = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}
questions: list[dict[str, Any]] = []


def asked(question: str, trace_id: str, lists: list[list[dict[str, Any]]], context: list[dict[str, Any]],
          answer: str | None) -> None:
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": lists,
                      "context": context, "answer": answer})


# --- 1. LlamaIndex -------------------------------------------------------------------------------

corpus = []
for d in plan["documents"]:
    metadata = document_metadata(d)
    corpus.append(LlamaDocument(text=d["text"], doc_id=d["doc_id"], metadata=metadata))
nodes = SentenceSplitter().get_nodes_from_documents(corpus)  # an ingestion run: a trace with no retrieval
llama_retriever = LlamaBM25.from_defaults(nodes=nodes, similarity_top_k=2)
reranker = KeywordOverlapRerank(top_n=1)
engine = RetrieverQueryEngine.from_args(llama_retriever, llm=MockLLM(max_tokens=8), node_postprocessors=[reranker])


def request(question: str, run):
    """The application's request span around a LlamaIndex call: the caller lives here."""
    def call():
        with mlflow.start_span(name="handle_question", span_type=SpanType.CHAIN) as span:
            span.set_inputs({"question": question})
            span.set_attributes({"user.id": caller["id"], "session.id": conversation, "metadata": caller_metadata})
            result = run()
            span.set_outputs({"answer": str(result)} if not isinstance(result, list) else None)
            return result
    return call


question = plan["questions"][0]
found, trace_id = one_trace(roots, request(question, lambda: llama_retriever.retrieve(question)))
asked(question, trace_id, [nodes_of(found)], nodes_of(found), None)

question = plan["questions"][1]
response, trace_id = one_trace(roots, request(question, lambda: engine.query(question)))
asked(question, trace_id, [nodes_of(reranker.seen[-1]), nodes_of(response.source_nodes)],
      nodes_of(response.source_nodes), str(response))


# --- 2. LangChain --------------------------------------------------------------------------------

lc_corpus = []
for i, d in enumerate(plan["documents"]):
    metadata = {"source": d["doc_id"]}
    if d["version"] is not None:
        metadata["doc_version"] = d["version"]
    if d["acl"] is not None:
        metadata["acl"] = d["acl"]
    if i % 2:
        metadata["page"] = i  # named source#page; the rest by their Document id
    lc_corpus.append(LangChainDocument(page_content=d["text"], metadata=metadata,
                                       id=None if i % 2 else f"{d['doc_id']}#0"))
lc_retriever = LangChainBM25.from_documents(lc_corpus, k=2)
seen: list[list[LangChainDocument]] = []


def keep(documents: list[LangChainDocument]) -> list[LangChainDocument]:
    seen.append(documents)
    return documents


prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
model = FakeListChatModel(responses=["Here is what the documents say."])
chain = ({"context": lc_retriever | RunnableLambda(keep) | (lambda docs: "\n".join(d.page_content for d in docs)),
          "question": RunnablePassthrough()} | prompt | model | StrOutputParser())
run_config = {"metadata": {"user_id": caller["id"], "session_id": conversation, **caller_metadata}}


question = plan["questions"][2]
answer, trace_id = one_trace(roots, lambda: chain.invoke(question, config=run_config))
asked(question, trace_id, [documents_of(seen[-1])], documents_of(seen[-1]), answer)

question = plan["questions"][3]
found, trace_id = one_trace(roots, lambda: lc_retriever.invoke(question, config=run_config))
asked(question, trace_id, [documents_of(found)], documents_of(found), None)


# --- 3. The application's own functions ----------------------------------------------------------


@mlflow.trace(span_type=SpanType.RETRIEVER)
def search(query: str) -> list[MlflowDocument]:
    """The two documents sharing the most words with the query, scored by the share of its words,
    in MLflow's documented retriever output (``mlflow.entities.Document``, the score in metadata)."""
    asked_words = set(query.lower().split())
    scored = sorted(((len(asked_words & set(d["text"].lower().split())) / len(asked_words), i, d)
                     for i, d in enumerate(plan["documents"])), key=lambda s: (-s[0], s[1]))[:2]
    return [MlflowDocument(page_content=d["text"], id=f"{d['doc_id']}#search",
                           metadata={"doc_id": d["doc_id"], "score": round(score, 4),
                                     **({"doc_version": d["version"]} if d["version"] else {}),
                                     **({"acl": d["acl"]} if d["acl"] else {})})
            for score, _, d in scored]


@mlflow.trace(span_type=SpanType.CHAIN)
def answer_question(question: str) -> str:
    mlflow.get_current_active_span().set_attributes({"user.id": caller["id"], "session.id": conversation,
                                                     "metadata": caller_metadata})
    found = search(question)
    answer_question.found = found
    return f"From {len(found)} passages: {found[0].page_content.split('.')[0]}."


def mlflow_documents(documents: list[MlflowDocument]) -> list[dict[str, Any]]:
    return [{"id": d.id, "content": d.page_content, "metadata": {k: v for k, v in d.metadata.items() if k != "score"},
             "score": d.metadata["score"]} for d in documents]


question = plan["questions"][4]
answer, trace_id = one_trace(roots, lambda: answer_question(question))
found = mlflow_documents(answer_question.found)
asked(question, trace_id, [found], found, answer)
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 1})
