"""LlamaIndex chat engines, instrumented with OpenInference or OpenLLMetry (``--instrumentation``),
two conversations of three turns:

1. ``CondenseQuestionChatEngine`` over a query engine, the plan's ``turns``, the history passed to
   ``chat(message, chat_history)``;
2. ``CondensePlusContextChatEngine`` over the retriever, the plan's ``context_turns``, the history
   kept in the engine's own memory.

With history, each engine has its model condense the message into a standalone question, which the
retriever searches; the first turn, without history, searches the message itself. LlamaIndex has no
fake model that answers a script (``MockLLM`` echoes its prompt), so the model is a ``CustomLLM`` that
answers a condense prompt with the turn's ``rewrite`` and any other with a fixed answer. What the
retriever searched is recorded by the retriever itself (a subclass noting the query bundle of each
call and what it returned), never read from the spans. Its class name holds no digit: OpenLLMetry
makes no span for a LlamaIndex class whose name does (docs/events.md).
"""

from __future__ import annotations

from typing import Any

from otel_export import arguments, document_metadata, load_plan, one_trace, provider, report, traceloop_provider

args = arguments(lambda parser: parser.add_argument("--instrumentation", choices=("openinference", "openllmetry"),
                                                    required=True))
plan = load_plan(args)
if args.instrumentation == "openinference":
    from openinference.instrumentation import using_attributes
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
    LlamaIndexInstrumentor().instrument(tracer_provider=tracer_provider)
else:
    tracer_provider, roots = traceloop_provider(args.export)
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor
    from traceloop.sdk import Traceloop

    LlamaIndexInstrumentor().instrument()  # Traceloop.init does not, without the llama-index distribution

from llama_index.core import Document  # noqa: E402  (instrumented first, as the instrumentations ask)
from llama_index.core.chat_engine import CondensePlusContextChatEngine, CondenseQuestionChatEngine  # noqa: E402
from llama_index.core.llms import ChatMessage, CompletionResponse, CustomLLM, LLMMetadata  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: E402
from llama_index.retrievers.bm25 import BM25Retriever  # noqa: E402

searches: list[tuple[str, list[NodeWithScore]]] = []  # (query, nodes) of every retriever call, in order


class RecordingKeywordRetriever(BM25Retriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = super()._retrieve(query_bundle)
        searches.append((query_bundle.query_str, found))
        return found


class ScriptedLLM(CustomLLM):
    """Answers a prompt asking for a standalone question (both engines' condense prompts do) with
    the next of ``rewrites``, and any other prompt with ``answer``."""

    rewrites: list[str] = []
    answer: str = "From the documents."

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if "standalone question" in prompt.lower():
            return CompletionResponse(text=self.rewrites.pop(0))
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError("the engines are asked without streaming")


corpus = []
for d in plan["documents"]:
    metadata = document_metadata(d)
    corpus.append(Document(text=d["text"], doc_id=d["doc_id"], metadata=metadata))
before = len(roots.trace_ids)
nodes = SentenceSplitter().get_nodes_from_documents(corpus)  # an ingestion run: a trace without retrieval, if traced
ingestion_traces = len(roots.trace_ids) - before
retriever = RecordingKeywordRetriever.from_defaults(nodes=nodes, similarity_top_k=2)


def documents_of(found: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [{"id": n.node.node_id, "content": n.node.get_content(), "metadata": dict(n.node.metadata),
             "score": n.score} for n in found]


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


def chat(engine_of, turns: list[dict[str, Any]], conversation: str, shape: str, pass_history: bool) -> None:
    """Three turns with a new engine; ``pass_history``: the history goes to ``chat`` with each
    message, else the engine keeps it in its memory."""
    llm = ScriptedLLM(rewrites=[t["rewrite"] for t in turns if t["rewrite"] is not None])
    engine = engine_of(llm)
    history: list[ChatMessage] = []
    for n, turn in enumerate(turns, start=1):
        before = len(searches)
        response, trace_id = ask(lambda m=turn["message"], h=list(history): engine.chat(m, h) if pass_history
                                 else engine.chat(m), conversation, n)
        made = searches[before:]
        questions.append({"trace_id": trace_id, "question": turn["message"], "caller": caller,
                          "answer": str(response), "lists": [documents_of(found) for _, found in made],
                          "searched": [q for q, _ in made], "context": documents_of(response.source_nodes),
                          "conversation": conversation, "turn": n, "shape": shape})
        history += [ChatMessage(role="user", content=turn["message"]),
                    ChatMessage(role="assistant", content=str(response))]
    if llm.rewrites:
        raise SystemExit(f"{shape}: the engine condensed fewer follow-ups than the plan has")


chat(lambda llm: CondenseQuestionChatEngine.from_defaults(
    query_engine=RetrieverQueryEngine.from_args(retriever, llm=llm), llm=llm),
    plan["turns"], plan["conversation"], "condense-question", pass_history=True)
chat(lambda llm: CondensePlusContextChatEngine.from_defaults(retriever=retriever, llm=llm),
     plan["context_turns"], f"{plan['conversation']}-context", "condense-plus-context", pass_history=False)
report(tracer_provider, {"questions": questions, "traces_without_retrieval": ingestion_traces})
