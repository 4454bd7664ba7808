"""Haystack, instrumented with OpenInference, answering the plan's questions three ways:

0. an indexing pipeline (a ``DocumentWriter`` into an ``InMemoryDocumentStore``): a trace with no
   retrieval. Some documents carry ids the application gave them, the others Haystack's own
   content-hash ids; ``doc_id``, ``doc_version`` and ``acl`` are in ``meta``;
1. a RAG pipeline, ``InMemoryBM25Retriever`` -> ``PromptBuilder`` -> a fake generator (questions
   1-3): one RETRIEVER span with the documents, the prompt builder and the generator both as LLM
   spans, the question and every component's output as JSON on the root CHAIN span;
2. the retriever alone (question 4): no generator, no answer;
3. the RAG pipeline with a ``LostInTheMiddleRanker`` between the retriever and the prompt
   (question 5), keeping three of four passages and reordering them; the instrumentation reports
   it as a RERANKER span whose output documents carry ids, content and scores but no metadata;
4. a pipeline that only builds the prompt (question 6, when the plan has one): the model is called
   elsewhere, so there is no answer, although the prompt builder is an LLM span with text output.

The caller is attached with OpenInference's ``using_attributes``, which Haystack's instrumentation
copies onto every span. What is reported comes from ``Pipeline.run(..., include_outputs_from=...)``.
"""

from __future__ import annotations

from typing import Any

from openinference.instrumentation import using_attributes
from openinference.instrumentation.haystack import HaystackInstrumentor
from otel_export import arguments, load_plan, one_trace, provider, report

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
HaystackInstrumentor().instrument(tracer_provider=tracer_provider)

from haystack import Document, Pipeline, component  # noqa: E402  (instrumented first, as the instrumentation asks)
from haystack.components.builders import PromptBuilder  # noqa: E402
from haystack.components.rankers import LostInTheMiddleRanker  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.components.writers import DocumentWriter  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

TEMPLATE = """Answer from these passages only.
{% for document in documents %}- {{ document.content }}
{% endfor %}Question: {{ question }}"""


@component
class EchoGenerator:
    """A stand-in for an LLM: replies with the first passage of its prompt."""

    @component.output_types(replies=list[str])
    def run(self, prompt: str) -> dict[str, list[str]]:
        passages = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
        return {"replies": [f"From the documents: {passages[0]}" if passages else "No passage was given."]}


def documents_of(documents: list[Document]) -> list[dict[str, Any]]:
    return [{"id": d.id, "content": d.content, "metadata": dict(d.meta), "score": d.score} for d in documents]


corpus = []
for i, d in enumerate(plan["documents"]):
    meta = {"doc_id": d["doc_id"]}
    if d["version"] is not None:
        meta["doc_version"] = d["version"]
    if d["acl"] is not None:
        meta["acl"] = d["acl"]
    own_id = {"id": f"{d['doc_id']}#0"} if i % 2 == 0 else {}  # the others: Haystack's content-hash id
    corpus.append(Document(content=d["text"], meta=meta, **own_id))
store = InMemoryDocumentStore()
indexing = Pipeline()
indexing.add_component("writer", DocumentWriter(document_store=store))
indexing.run({"writer": {"documents": corpus}})  # a trace with no retrieval

rag = Pipeline()
rag.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
rag.add_component("prompt_builder", PromptBuilder(template=TEMPLATE))
rag.add_component("llm", EchoGenerator())
rag.connect("retriever.documents", "prompt_builder.documents")
rag.connect("prompt_builder.prompt", "llm.prompt")

ranked = Pipeline()
ranked.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=4))
ranked.add_component("ranker", LostInTheMiddleRanker(top_k=3))
ranked.add_component("prompt_builder", PromptBuilder(template=TEMPLATE))
ranked.add_component("llm", EchoGenerator())
ranked.connect("retriever.documents", "ranker.documents")
ranked.connect("ranker.documents", "prompt_builder.documents")
ranked.connect("prompt_builder.prompt", "llm.prompt")

retrieval = Pipeline()
retrieval.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))

prompt_only = Pipeline()
prompt_only.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
prompt_only.add_component("prompt_builder", PromptBuilder(template=TEMPLATE))
prompt_only.connect("retriever.documents", "prompt_builder.documents")

caller = plan["caller"]
questions = []


def ask(pipeline: Pipeline, question: str, lists: tuple[str, ...], context: str) -> None:
    """Runs ``pipeline`` on ``question`` as the caller; ``lists``: the components whose documents
    are the retrieval lists, ``context``: the one that feeds the prompt builder."""
    data = {"retriever": {"query": question}}
    if "prompt_builder" in pipeline.graph.nodes:
        data["prompt_builder"] = {"question": question}

    def run() -> dict[str, Any]:
        with using_attributes(user_id=caller["id"], metadata={"tenant": args.tenant, "groups": caller["groups"],
                                                               "index": plan["index"]}):
            return pipeline.run(data, include_outputs_from={*lists, context})

    out, trace_id = one_trace(roots, run)
    replies = out.get("llm", {}).get("replies")
    questions.append({"trace_id": trace_id, "question": question, "caller": caller,
                      "lists": [documents_of(out[name]["documents"]) for name in lists],
                      "context": documents_of(out[context]["documents"]),
                      "answer": replies[0] if replies else None})


for question in plan["questions"][:3]:
    ask(rag, question, ("retriever",), "retriever")
ask(retrieval, plan["questions"][3], ("retriever",), "retriever")
ask(ranked, plan["questions"][4], ("retriever", "ranker"), "ranker")
for question in plan["questions"][5:]:
    ask(prompt_only, question, ("retriever",), "retriever")
report(tracer_provider, {"questions": questions, "traces_without_retrieval": 1})
