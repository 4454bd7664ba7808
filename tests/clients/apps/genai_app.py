"""An application instrumented by hand with the OTel GenAI semantic conventions (no framework), its
retrieval a keyword search of its own over the plan's documents, its model a deterministic stub.

Per question one trace: an ``invoke_workflow {name}`` root (INTERNAL) carrying the caller
(``user.id``, or the deprecated ``enduser.id``, and ``ragmon.caller.groups``: GenAI has no
groups), a retrieval span, and a ``chat {model}`` inference span with token usage and
``gen_ai.output.messages``. The retrieval span takes the conventions' two shapes:

1. questions 1-2: the client retrieval span, ``retrieval {gen_ai.data_source.id}`` (CLIENT), with
   ``gen_ai.retrieval.documents`` (``[{id, score}]``, the ids being document ids) and the output
   messages recorded in structured form (arrays of maps on the wire);
2. questions 3-4: the same, recorded as JSON strings (allowed where structured values are not);
3. question 5: the framework retrieval span, ``retrieval`` (INTERNAL), whose documents are chunks
   naming their document in an extra property (``doc_id``), in structured form.

The documents carry only ids and scores: ACL, version and staleness are the catalog's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from opentelemetry.trace import SpanKind
from otel_export import arguments, load_plan, one_trace, provider, report

args = arguments()
plan = load_plan(args)
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
tracer = tracer_provider.get_tracer("rag-app")
caller = plan["caller"]
source = plan["index"]  # gen_ai.data_source.id: the index the catalog's index events name
MODEL, TOP_K = "stub-chat-1", 2
STOPWORDS = {"a", "an", "and", "at", "do", "does", "each", "how", "i", "in", "into", "is", "many", "of", "on", "the",
             "to", "what", "when"}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


def search(question: str) -> list[dict[str, Any]]:
    """The TOP_K documents sharing the most words with the question; score = share of its words."""
    asked = words(question)
    scored = [(len(asked & words(d["text"])) / len(asked), i, d) for i, d in enumerate(plan["documents"])]
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[:TOP_K]
    return [{"id": d["doc_id"], "content": d["text"], "metadata": {}, "score": round(score, 4)}
            for score, _, d in best]


def stub_chat(question: str, context: list[dict[str, Any]]) -> str:
    return f"From {len(context)} passages: {re.split(r'[:;.]', context[0]['content'])[0]}."


def attribute(value: Any, structured: bool) -> Any:
    return value if structured else json.dumps(value)


def answer(question: str, shape: str, n: int) -> tuple[list[dict[str, Any]], str, dict[str, int]]:
    structured = shape != "json"
    caller_key = "user.id" if n % 2 == 0 else "enduser.id"
    with tracer.start_as_current_span("invoke_workflow policy-assistant", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": "policy-assistant",
            caller_key: caller["id"], "ragmon.caller.groups": caller["groups"]}):
        framework = shape == "framework"
        with tracer.start_as_current_span("retrieval" if framework else f"retrieval {source}",
                                          kind=SpanKind.INTERNAL if framework else SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": source,
                "gen_ai.retrieval.query.text": question, "gen_ai.retrieval.top_k": TOP_K}) as span:
            found = search(question)
            if framework:  # chunks of the documents, each naming its document
                for d in found:
                    d["metadata"] = {"doc_id": d["id"]}
                    d["id"] = f"{d['id']}#0"
            span.set_attribute("gen_ai.retrieval.documents", attribute(
                [{"id": d["id"], "score": d["score"], **d["metadata"]} for d in found], structured))
        text = stub_chat(question, found)
        prompt = [{"role": "system", "parts": [{"type": "text", "content": "\n".join(d["content"] for d in found)}]},
                  {"role": "user", "parts": [{"type": "text", "content": question}]}]
        usage = {"input_tokens": sum(len(p["parts"][0]["content"].split()) for p in prompt),
                 "output_tokens": len(text.split())}
        with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "stub", "gen_ai.request.model": MODEL,
                "gen_ai.response.model": MODEL, "gen_ai.conversation.id": f"{args.tenant}-conversation-{n}",
                "gen_ai.usage.input_tokens": usage["input_tokens"],
                "gen_ai.usage.output_tokens": usage["output_tokens"],
                "gen_ai.response.finish_reasons": ["stop"]}) as chat:
            chat.set_attribute("gen_ai.input.messages", attribute(prompt, structured))
            chat.set_attribute("gen_ai.output.messages", attribute(
                [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}],
                structured))
    return found, text, usage


questions = []
for n, (question, shape) in enumerate(zip(plan["questions"], ["structured"] * 2 + ["json"] * 2 + ["framework"],
                                          strict=True)):
    (found, text, usage), trace_id = one_trace(roots, lambda q=question, s=shape, n=n: answer(q, s, n))
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": [found],
                      "context": found, "answer": text, "usage": usage, "shape": shape,
                      "caller_attribute": "user.id" if n % 2 == 0 else "enduser.id",
                      "conversation_id": f"{args.tenant}-conversation-{n}", "retriever":
                      "retrieval" if shape == "framework" else f"retrieval {source}"})
report(tracer_provider, {"questions": questions})
