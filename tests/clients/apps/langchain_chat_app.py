"""LangChain chats, instrumented with OpenInference or OpenLLMetry (``--instrumentation``), two
conversations of three turns:

1. ``create_retrieval_chain`` over ``create_history_aware_retriever`` (langchain-classic), the
   plan's ``turns``: with chat history, a condense step (a fake chat model answering the turn's
   ``rewrite``) writes the question the retriever searches; the first turn, without history,
   searches the message itself;
2. a ``MultiQueryRetriever`` inside an LCEL chain, the plan's ``expansion_turns``: a fake chat
   model answers three searches (the turn's ``expansions``), each run by the BM25 retriever, and
   their unique union is the context.

What each retriever searched is recorded by the retrievers themselves (a subclass noting the query
each call was given and what it returned), never read from the spans. Each turn carries the
conversation id and its turn number where the instrumentation's users put them: OpenInference's
``using_attributes(session_id=..., metadata={"turn": n})``, OpenLLMetry's association properties.
"""

from __future__ import annotations

from typing import Any

from otel_export import arguments, load_plan, one_trace, provider, report, traceloop_provider

args = arguments(lambda parser: parser.add_argument("--instrumentation", choices=("openinference", "openllmetry"),
                                                    required=True))
plan = load_plan(args)
if args.instrumentation == "openinference":
    from openinference.instrumentation import using_attributes
    from openinference.instrumentation.langchain import LangChainInstrumentor

    tracer_provider, roots = provider(args.export)
    LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
else:
    tracer_provider, roots = traceloop_provider(args.export)
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor
    from traceloop.sdk import Traceloop

    LangchainInstrumentor().instrument()  # Traceloop.init does not, without the langchain distribution

from langchain_classic.chains import create_history_aware_retriever, create_retrieval_chain  # noqa: E402
from langchain_classic.chains.combine_documents import create_stuff_documents_chain  # noqa: E402
from langchain_classic.retrievers.multi_query import MultiQueryRetriever  # noqa: E402
from langchain_community.retrievers import BM25Retriever  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402

searches: list[tuple[str, list[Document]]] = []  # (query, documents) of every retriever call, in order


class RecordingBM25Retriever(BM25Retriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        found = super()._get_relevant_documents(query, run_manager=run_manager)
        searches.append((query, found))
        return found


class RecordingMultiQueryRetriever(MultiQueryRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        found = super()._get_relevant_documents(query, run_manager=run_manager)
        searches.append((query, found))
        return found


corpus = []
for d in plan["documents"]:
    metadata: dict[str, Any] = {"source": d["doc_id"], "chunk_id": f"{d['doc_id']}#0"}  # named by chunk_id
    if d["version"] is not None:
        metadata["doc_version"] = d["version"]
    if d["acl"] is not None:
        metadata["acl"] = d["acl"]
    corpus.append(Document(page_content=d["text"], metadata=metadata))
retriever = RecordingBM25Retriever.from_documents(corpus, k=2)
turns = plan["turns"]

rephrase = ChatPromptTemplate.from_messages([
    MessagesPlaceholder("chat_history"), ("user", "{input}"),
    ("user", "Given the conversation above, write a standalone search query for the last question.")])
condense = FakeListChatModel(responses=[t["rewrite"] for t in turns if t["rewrite"] is not None])
answer_prompt = ChatPromptTemplate.from_messages([
    ("system", "Answer from the context.\n{context}"), MessagesPlaceholder("chat_history"), ("user", "{input}")])
answers = FakeListChatModel(responses=[f"Answer {n} from the documents." for n in range(1, len(turns) + 1)])
history_aware = create_retrieval_chain(create_history_aware_retriever(condense, retriever, rephrase),
                                       create_stuff_documents_chain(answers, answer_prompt))

expand = FakeListChatModel(responses=["\n".join(t["expansions"]) for t in plan["expansion_turns"]])
multi_query = RecordingMultiQueryRetriever.from_llm(retriever=retriever, llm=expand)
seen: list[list[Document]] = []


def keep(documents: list[Document]) -> str:
    seen.append(documents)
    return "\n".join(d.page_content for d in documents)


multi_query_chain = ({"context": multi_query | keep, "question": RunnablePassthrough()}
                     | ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
                     | FakeListChatModel(responses=["From the documents."]) | StrOutputParser())


def documents_of(documents: list[Document]) -> list[dict[str, Any]]:
    return [{"id": d.id, "content": d.page_content, "metadata": dict(d.metadata), "score": None} for d in documents]


caller = plan["caller"]
questions = []


def ask(run, conversation: str, turn: int) -> tuple[Any, str]:
    """One turn, the caller, conversation and turn set as the instrumentation's users set them."""
    facts = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"], "turn": turn}
    if args.instrumentation == "openinference":
        def call():
            with using_attributes(user_id=caller["id"], session_id=conversation, metadata=facts):
                return run()
        return one_trace(roots, call)
    Traceloop.set_association_properties({"user_id": caller["id"], "session_id": conversation, **facts,
                                          "turn": str(turn)})  # association properties are strings
    return one_trace(roots, run)


def asked(trace_id: str, message: str, made: list[tuple[str, list[Document]]], context: list[Document],
          answer: str, conversation: str, turn: int, shape: str) -> None:
    questions.append({"trace_id": trace_id, "question": message, "caller": caller, "answer": answer,
                      "lists": [documents_of(found) for _, found in made], "searched": [q for q, _ in made],
                      "context": documents_of(context), "conversation": conversation, "turn": turn, "shape": shape})


history: list[Any] = []
for n, turn in enumerate(turns, start=1):
    before = len(searches)
    result, trace_id = ask(lambda m=turn["message"], h=list(history): history_aware.invoke(
        {"input": m, "chat_history": h}), plan["conversation"], n)
    made = searches[before:]
    asked(trace_id, turn["message"], made, result["context"], result["answer"], plan["conversation"], n,
          "history-aware")
    history += [HumanMessage(turn["message"]), AIMessage(result["answer"])]

for n, turn in enumerate(plan["expansion_turns"], start=1):
    before = len(searches)
    answer, trace_id = ask(lambda m=turn["message"]: multi_query_chain.invoke(m), f"{plan['conversation']}-mq", n)
    made = searches[before:]
    *sources, (_, union) = made
    if any([d.page_content for d in found] == [d.page_content for d in union] for _, found in sources):
        raise SystemExit("a search found all the others did: the plan's expansions must differ more")
    asked(trace_id, turn["message"], made, seen[-1], answer, f"{plan['conversation']}-mq", n, "multi-query")
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 0})
