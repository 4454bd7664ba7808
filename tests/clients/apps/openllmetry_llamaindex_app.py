"""LlamaIndex, instrumented with OpenLLMetry (``Traceloop.init`` and opentelemetry-instrumentation-
llamaindex), answering the plan's questions four ways, the caller in the SDK's association
properties (``user_id``, ``session_id``, ``tenant``, ``groups``, ``index``):

1. a vector retriever alone (question 1): ``VectorIndexRetriever.workflow`` around two
   ``VectorIndexRetriever.task`` spans (``retrieve``, ``_retrieve``), each listing the nodes;
2. the application's retriever that drops weak matches (questions 2 and 6): a subclass of the
   vector retriever, so three nested spans of one name; the innermost lists the unfiltered top k,
   the outermost what the caller got, which for question 6 (about nothing in the corpus) is
   nothing: an empty context, though the innermost holds zero-score nodes;
3. a query engine whose node postprocessor reranks (questions 3-4): the postprocessor's span
   lists the nodes it kept (its input holds the nodes it was given): a reranker's list, the
   context;
4. a query engine with a similarity cutoff (question 5): the cutoff's span is likewise the list
   the synthesizer got.

Embeddings are the application's own (word counts over the corpus' vocabulary): no model.

Upstream, as of opentelemetry-instrumentation-llamaindex 0.62.4: ``Traceloop.init`` instruments
LlamaIndex only when the ``llama-index`` distribution is installed (not with ``llama-index-core``
alone), so the app calls ``LlamaIndexInstrumentor().instrument()`` itself; and a class whose name
holds a digit (``BM25Retriever``) makes no span at all (its span ids do not match the
instrumentation's pattern), which is why the retrievers here are vector retrievers.
"""

from __future__ import annotations

from otel_export import arguments, document_metadata, load_plan, one_trace, report, traceloop_provider
from reported import llama_nodes as documents_of
from word_vectors import WordVectors, words

args = arguments()
plan = load_plan(args)
tracer_provider, roots = traceloop_provider(args.export)
from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor  # noqa: E402
from traceloop.sdk import Traceloop  # noqa: E402

LlamaIndexInstrumentor().instrument()  # Traceloop.init does not, without the llama-index distribution

from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import BaseEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.postprocessor import SimilarityPostprocessor  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.retrievers import VectorIndexRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: E402

MIN_SCORE = 0.3


vectors = WordVectors(d["text"] for d in plan["documents"])


class WordCountEmbedding(BaseEmbedding):
    """Unit vectors of word counts over the corpus' vocabulary."""

    def _vector(self, text: str) -> list[float]:
        return vectors.embed(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


class ConfidentRetriever(VectorIndexRetriever):
    """Keeps only the nodes scoring at least MIN_SCORE (the vector store pads the top k)."""

    seen: list[list[NodeWithScore]] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = super()._retrieve(query_bundle)
        self.seen.append(found)
        return [n for n in found if (n.score or 0) >= MIN_SCORE]


class KeywordOverlapRerank(BaseNodePostprocessor):
    """Reorders nodes by the share of query words they contain and keeps the best ``top_n``."""

    top_n: int = 1

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        query = set(words(query_bundle.query_str)) if query_bundle else set()
        scored = [NodeWithScore(node=n.node, score=len(query & set(words(n.node.get_content()))) / 10) for n in nodes]
        return sorted(scored, key=lambda n: n.score, reverse=True)[: self.top_n]


class NotingRetriever(VectorIndexRetriever):
    """A vector retriever that keeps what it found (for the report)."""

    seen: list[list[NodeWithScore]] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = super()._retrieve(query_bundle)
        self.seen.append(found)
        return found


before = len(roots.trace_ids)
corpus = []
for d in plan["documents"]:
    metadata = document_metadata(d)
    corpus.append(Document(text=d["text"], doc_id=d["doc_id"], metadata=metadata))
nodes = SentenceSplitter().get_nodes_from_documents(corpus)  # ingestion: traces without retrieval
index = VectorStoreIndex(nodes, embed_model=WordCountEmbedding())
ingestion_traces = len(roots.trace_ids) - before

caller = plan["caller"]
Traceloop.set_association_properties({"user_id": caller["id"], "session_id": f"{args.tenant}-conversation",
                                      "tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]})
questions = []


def asked(question: str, lists, context, answer, trace_id: str, shape: str) -> None:
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": lists,
                      "context": context, "answer": answer, "shape": shape})


retriever = VectorIndexRetriever(index=index, similarity_top_k=2)
confident = ConfidentRetriever(index=index, similarity_top_k=2)
question = plan["questions"][0]
found, trace_id = one_trace(roots, lambda: retriever.retrieve(question))
asked(question, [documents_of(found)], documents_of(found), None, trace_id, "retriever")
for question in [plan["questions"][1], *plan["questions"][5:]]:
    found, trace_id = one_trace(roots, lambda q=question: confident.retrieve(q))
    # one list, the outermost level's: the unfiltered top k of the innermost is not what the caller got
    asked(question, [documents_of(found)], documents_of(found), None, trace_id, "confident retriever")
    questions[-1]["unfiltered"] = documents_of(confident.seen[-1])

noting = NotingRetriever(index=index, similarity_top_k=2)
engine = RetrieverQueryEngine.from_args(noting, llm=MockLLM(max_tokens=8),
                                        node_postprocessors=[KeywordOverlapRerank(top_n=1)])
for question in plan["questions"][2:4]:
    response, trace_id = one_trace(roots, lambda q=question: engine.query(q))
    asked(question, [documents_of(noting.seen[-1]), documents_of(response.source_nodes)],
          documents_of(response.source_nodes), str(response), trace_id, "query engine, reranker")

wide = NotingRetriever(index=index, similarity_top_k=3)
cutoff = RetrieverQueryEngine.from_args(wide, llm=MockLLM(max_tokens=8),
                                        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=MIN_SCORE)])
question = plan["questions"][4]
response, trace_id = one_trace(roots, lambda: cutoff.query(question))
asked(question, [documents_of(wide.seen[-1]), documents_of(response.source_nodes)],
      documents_of(response.source_nodes), str(response), trace_id, "query engine, similarity cutoff")
report(tracer_provider, {"questions": questions, "traces_without_retrieval": ingestion_traces})
