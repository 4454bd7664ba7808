"""LlamaIndex, instrumented with OpenInference, answering the plan's questions three ways:

1. a BM25 retriever alone (questions 1-2): one retrieval, reported by LlamaIndex as two nested
   RETRIEVER spans (``retrieve`` with the documents, ``_retrieve`` without);
2. a query engine, BM25 -> a reranker -> a response synthesizer on MockLLM (questions 3-4); the
   reranker is the application's own node postprocessor, dispatching LlamaIndex's rerank events
   as its built-in rerankers do, so the instrumentation reports a RERANKER span;
3. a query engine whose similarity cutoff drops passages (question 5): no span says which
   passages the model got, so the application names them in ``ragmon.context.document_ids`` on
   its own root span, with the caller in ``user.id`` and ``ragmon.caller.groups``;
4. a retriever of the application's that drops BM25's zero-score padding (any further question):
   nested RETRIEVER spans of which the outermost reports what the caller got, for a question about
   nothing in the corpus nothing (OpenInference writes no documents then, on any of them).
"""

from __future__ import annotations

from openinference.instrumentation import using_attributes
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from otel_export import arguments, document_metadata, load_plan, one_trace, provider, report
from reported import llama_nodes as documents_of

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
LlamaIndexInstrumentor().instrument(tracer_provider=tracer_provider)

from llama_index.core import Document  # noqa: E402  (instrumented first, as the instrumentation asks)
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.postprocessor import SimilarityPostprocessor  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: E402
from llama_index.retrievers.bm25 import BM25Retriever  # noqa: E402
from llama_parts import KeywordOverlapRerank, Recorder  # noqa: E402

corpus = []
for d in plan["documents"]:
    metadata = document_metadata(d)
    corpus.append(Document(text=d["text"], doc_id=d["doc_id"], metadata=metadata))
nodes = SentenceSplitter().get_nodes_from_documents(corpus)  # an ingestion run: a trace with no retrieval
retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=2)
wide_retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=3)
caller = plan["caller"]
questions = []


def asked(question: str, lists, context, answer, trace_id: str) -> None:
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": lists,
                      "context": context, "answer": answer})


def under_caller(run):
    def call():
        with using_attributes(user_id=caller["id"], metadata={"tenant": args.tenant, "groups": caller["groups"],
                                                               "index": plan["index"]}):
            return run()
    return call


for question in plan["questions"][:2]:
    found, trace_id = one_trace(roots, under_caller(lambda q=question: retriever.retrieve(q)))
    asked(question, [documents_of(found)], documents_of(found), None, trace_id)

reranker = KeywordOverlapRerank(top_n=1)
engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8), node_postprocessors=[reranker])
for question in plan["questions"][2:4]:
    response, trace_id = one_trace(roots, under_caller(lambda q=question: engine.query(q)))
    candidates = reranker.seen[-1]
    asked(question, [documents_of(candidates), documents_of(response.source_nodes)],
          documents_of(response.source_nodes), str(response), trace_id)

recorder = Recorder()
cutoff = RetrieverQueryEngine.from_args(wide_retriever, llm=MockLLM(max_tokens=8),
                                        node_postprocessors=[recorder, SimilarityPostprocessor(similarity_cutoff=0.1)])
tracer = tracer_provider.get_tracer("rag-app")


def with_explicit_context(question: str):
    with tracer.start_as_current_span("answer", attributes={
            "user.id": caller["id"], "ragmon.caller.groups": caller["groups"],
            "metadata": f'{{"index": "{plan["index"]}"}}'}) as span:
        response = cutoff.query(question)
        span.set_attribute("ragmon.context.document_ids", [n.node.node_id for n in response.source_nodes])
        span.set_attribute("input.value", question)
        span.set_attribute("output.value", str(response))
        span.set_attribute("openinference.span.kind", "CHAIN")
        return response


question = plan["questions"][4]
response, trace_id = one_trace(roots, lambda: with_explicit_context(question))
asked(question, [documents_of(recorder.seen[-1])], documents_of(response.source_nodes), str(response), trace_id)


class ConfidentBM25Retriever(BM25Retriever):
    """Drops the zero-score nodes BM25 pads its top k with."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [n for n in super()._retrieve(query_bundle) if (n.score or 0) > 0]


confident = ConfidentBM25Retriever.from_defaults(nodes=nodes, similarity_top_k=2)
for question in plan["questions"][5:]:  # about nothing in the corpus: the caller gets nothing
    found, trace_id = one_trace(roots, under_caller(lambda q=question: confident.retrieve(q)))
    asked(question, [documents_of(found)], documents_of(found), None, trace_id)
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 1})
