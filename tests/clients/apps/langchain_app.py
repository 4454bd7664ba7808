"""LangChain, instrumented with OpenInference, answering the plan's questions three ways:

1. a BM25 retriever alone (questions 1-2);
2. an LCEL chain: retriever -> prompt -> a fake chat model -> output parser (questions 3-4);
3. an ensemble retriever fusing two BM25 retrievers, inside the same kind of chain (question 5):
   one RETRIEVER span around two others with different documents, i.e. three lists.

LangChain's spans carry each Document's content and metadata but never its id. Some documents get
an id (``Document(id=...)``), some a ``source`` and ``page`` (as PDF loaders give), the rest only a
``source``: ragmon must name them by the id, by ``source#page``, and by a content hash.
"""

from __future__ import annotations

from typing import Any

from openinference.instrumentation import suppress_tracing, using_attributes
from openinference.instrumentation.langchain import LangChainInstrumentor
from otel_export import arguments, load_plan, one_trace, provider, report
from reported import langchain_documents as documents_of

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export)
LangChainInstrumentor().instrument(tracer_provider=tracer_provider)

from langchain_classic.retrievers import EnsembleRetriever  # noqa: E402
from langchain_community.retrievers import BM25Retriever  # noqa: E402
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
    document_id = f"{d['doc_id']}#0" if i % 3 == 0 else None  # named by its id; the rest by content
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


caller = plan["caller"]
questions = []


def ask(question: str, run) -> tuple[Any, str]:
    def call():
        with using_attributes(user_id=caller["id"], session_id=f"{args.tenant}-conversation",
                              metadata={"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}):
            return run()
    return one_trace(roots, call)


for question in plan["questions"][:2]:
    found, trace_id = ask(question, lambda q=question: retriever.invoke(q))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "answer": None,
                      "lists": [documents_of(found)], "context": documents_of(found)})

chain = chain_of(retriever)
for question in plan["questions"][2:4]:
    answer, trace_id = ask(question, lambda q=question: chain.invoke(q))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "answer": answer,
                      "lists": [documents_of(seen[-1])], "context": documents_of(seen[-1])})

question = plan["questions"][4]
fused_chain = chain_of(ensemble)
answer, trace_id = ask(question, lambda: fused_chain.invoke(question))
fused = seen[-1]
with suppress_tracing():  # what the ensemble's two retrievers returned, asked again without a trace
    sources = [documents_of(retriever.invoke(question)), documents_of(narrow.invoke(question))]
questions.append({"trace_id": trace_id, "question": question, "caller": caller, "answer": answer,
                  "lists": [*sources, documents_of(fused)], "context": documents_of(fused)})
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 0})
