"""LangChain traced by LangSmith's own OpenTelemetry export (``langsmith.Client(tracing_mode="otel")``
on the application's TracerProvider), an instrumentation ragmon has no dialect for: its spans
(scope ``langsmith``) carry ``langsmith.*`` attributes and GenAI operation names, a retriever's
being ``embeddings``. The plan's questions are asked two ways:

1. a BM25 retriever alone (questions 1-2);
2. an LCEL chain: retriever -> prompt -> a fake chat model -> output parser (questions 3-5).

The caller goes in the run's metadata, as LangChain applications pass it. Besides the usual
report, the app reports what the SDK itself made of each trace (every span's name, kind and
attribute keys, from an in-memory exporter on the same provider), the attribute values of its
spans that are text other than a span's name (which ragmon must never keep), and which traces are
the first of their shape.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_export import arguments, load_plan, one_trace, provider, report

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
made = InMemorySpanExporter()
tracer_provider.add_span_processor(SimpleSpanProcessor(made))

from langchain_community.retrievers import BM25Retriever  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langsmith import Client, tracing_context  # noqa: E402

# OTel only: nothing goes to LangSmith's own API (pointed at a closed port, to be sure)
client = Client(api_key="not-used", api_url="http://127.0.0.1:9", tracing_mode="otel",
                otel_tracer_provider=tracer_provider)

corpus = [Document(page_content=d["text"], metadata={"source": d["doc_id"]}) for d in plan["documents"]]
retriever = BM25Retriever.from_documents(corpus, k=2)
prompt = ChatPromptTemplate.from_template("Answer from the context.\n{context}\nQuestion: {question}")
model = FakeListChatModel(responses=["Here is what the documents say."])
context = retriever | (lambda docs: "\n".join(d.page_content for d in docs))
chain = {"context": context, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()
caller = plan["caller"]
questions, shapes = [], []


def ask(question: str, runnable, shape: str) -> None:
    metadata = {"user_id": caller["id"], "tenant": args.tenant, "groups": caller["groups"]}

    def run() -> Any:
        with tracing_context(enabled=True, client=client, project_name="rag"):
            answer = runnable.invoke(question, config={"metadata": metadata})
        client.flush()  # LangSmith makes the spans on its background thread, from the runs it queued
        return answer

    answer, trace_id = one_trace(roots, run)
    questions.append({"trace_id": trace_id, "question": question, "caller": caller,
                      "answer": answer if isinstance(answer, str) else None})
    if shape not in shapes:
        shapes.append(shape)
        questions[-1]["first_of_its_shape"] = True


for question in plan["questions"][:2]:
    ask(question, retriever, "retriever")
for question in plan["questions"][2:]:
    ask(question, chain, "chain")
tracer_provider.force_flush()

spans: dict[str, list[dict[str, Any]]] = {}
texts: set[str] = set()
for span in made.get_finished_spans():
    trace_id = format(span.context.trace_id, "032x")
    spans.setdefault(trace_id, []).append({
        "name": span.name, "kind": span.kind.name.lower(), "scope": span.instrumentation_scope.name,
        "scope_version": span.instrumentation_scope.version or "", "keys": sorted(span.attributes),
        "operation": span.attributes.get("gen_ai.operation.name")})
    texts.update(v for v in span.attributes.values() if isinstance(v, str) and len(v) > 20)
texts -= {span.name for span in made.get_finished_spans()}  # `langsmith.trace.name` repeats a span's name
report(tracer_provider, {"questions": questions, "traces_without_retrieval": len(questions), "spans": spans,
                         "texts": sorted(texts)})
