"""LangChain, instrumented with OpenLLMetry (``Traceloop.init`` and opentelemetry-instrumentation-
langchain), answering the plan's questions three ways:

1. a BM25 retriever alone (questions 1-2), the caller in the SDK's association properties for
   question 1 and in LangChain's run metadata (``config={"metadata": ...}``, which the
   instrumentation copies under the same prefix) for question 2;
2. an LCEL chain: retriever -> prompt -> a fake chat model -> output parser (questions 3-4);
3. an ensemble retriever fusing two BM25 retrievers, inside the same kind of chain (question 5):
   one ``vector_db_retrieve`` span around two others with different documents, three lists.

OpenLLMetry's retriever spans list each Document's content and metadata, never its id: a
Document's own id is not seen (upstream, as of 0.62.4), so passages are named from metadata
(``source#page``) or content. Some documents here have an id all the same, reported beside the
expectation as ``framework_id``, to show that it is lost. ``Traceloop.init`` instruments LangChain
only when the ``langchain`` distribution is installed (not with ``langchain-core`` and
``langchain-community`` alone), so the app calls ``LangchainInstrumentor().instrument()`` itself.
"""

from __future__ import annotations

from typing import Any

from otel_export import arguments, load_plan, one_trace, report, traceloop_provider

args = arguments()
plan = load_plan(args)
tracer_provider, roots = traceloop_provider(args.export)
from opentelemetry.instrumentation.langchain import LangchainInstrumentor  # noqa: E402
from traceloop.sdk import Traceloop  # noqa: E402

LangchainInstrumentor().instrument()  # Traceloop.init does not, without the langchain distribution

from langchain_classic.retrievers import EnsembleRetriever  # noqa: E402
from langchain_community.retrievers import BM25Retriever  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402

corpus = []
for i, d in enumerate(plan["documents"]):
    metadata: dict[str, Any] = {"source": d["doc_id"]}
    if d["version"] is not None:
        metadata["doc_version"] = d["version"]
    if d["acl"] is not None:
        metadata["acl"] = d["acl"]
    if i % 3 == 1:
        metadata["page"] = i  # named source#page
    document_id = f"{d['doc_id']}#0" if i % 3 == 0 else None  # an id OpenLLMetry does not export
    corpus.append(Document(page_content=d["text"], metadata=metadata, id=document_id))

retriever = BM25Retriever.from_documents(corpus, k=2)
narrow = BM25Retriever.from_documents(corpus[:3], k=1)
ensemble = EnsembleRetriever(retrievers=[retriever, narrow], weights=[0.5, 0.5])
seen: list[list[Document]] = []


def keep(documents: list[Document]) -> list[Document]:
    seen.append(documents)
    return documents


def chain_of(source):
    prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
    model = FakeListChatModel(responses=["Here is what the documents say."])
    context = source | RunnableLambda(keep) | (lambda docs: "\n".join(d.page_content for d in docs))
    return {"context": context, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()


def documents_of(documents: list[Document]) -> list[dict[str, Any]]:
    """What the framework returned, as ragmon can know it: without the Document id OpenLLMetry drops."""
    return [{"id": None, "framework_id": d.id, "content": d.page_content, "metadata": dict(d.metadata),
             "score": None} for d in documents]


caller = plan["caller"]
run_metadata = {"user_id": caller["id"], "session_id": f"{args.tenant}-conversation", "tenant": args.tenant,
                "groups": caller["groups"], "index": plan["index"]}
questions = []


def asked(question: str, trace_id: str, documents: list[list[Document]], context: list[Document],
          answer: str | None, where: str) -> None:
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "answer": answer,
                      "caller_in": where, "lists": [documents_of(d) for d in documents],
                      "context": documents_of(context)})


question = plan["questions"][0]
Traceloop.set_association_properties(run_metadata)
found, trace_id = one_trace(roots, lambda: retriever.invoke(question))
asked(question, trace_id, [found], found, None, "association properties")
Traceloop.set_association_properties({})  # from here on the caller is in LangChain's run metadata

question = plan["questions"][1]
found, trace_id = one_trace(roots, lambda: retriever.invoke(question, config={"metadata": run_metadata}))
asked(question, trace_id, [found], found, None, "run metadata")

chain = chain_of(retriever)
for question in plan["questions"][2:4]:
    answer, trace_id = one_trace(roots, lambda q=question: chain.invoke(q, config={"metadata": run_metadata}))
    asked(question, trace_id, [seen[-1]], seen[-1], answer, "run metadata")

question = plan["questions"][4]
fused_chain = chain_of(ensemble)
answer, trace_id = one_trace(roots, lambda: fused_chain.invoke(question, config={"metadata": run_metadata}))
# what the ensemble's two retrievers returned (BM25 is deterministic), asked again without callbacks:
# no span, no trace
quiet = CallbackManagerForRetrieverRun.get_noop_manager()
sources = [r._get_relevant_documents(question, run_manager=quiet) for r in (retriever, narrow)]
asked(question, trace_id, [*sources, seen[-1]], seen[-1], answer, "run metadata")
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 0})
