"""DSPy, instrumented with OpenInference, answering the plan's questions with a retrieval module:
``dspy.Retrieve(k=2)`` over ``dspy.ColBERTv2`` (DSPy's configured ``rm``), then a ``Predict`` on
``DummyLM``. ColBERTv2 is an HTTP client, so the app serves its own tiny ColBERT-compatible search
on 127.0.0.1 (``GET ?query=&k=``, word-overlap ranking over the plan's documents, only documents
sharing a word with the query); each passage's ``pid`` is its document's id, the id the catalog
knows it by. DSPy passages carry no metadata: their ACL and version come from the catalog alone.

What it exercises:

1. one retrieval reported as two nested RETRIEVER spans, ``Retrieve.forward`` with the passages'
   content only around ``ColBERTv2.__call__`` with pid, content and score: one list, ColBERT's ids;
2. the question and the answer as JSON input and output of the root CHAIN ``RAG.forward``, the
   caller from ``using_attributes`` (``user.id`` and ``metadata`` on every span);
3. a question no document matches (the plan's last): both levels empty, one empty list and an
   empty context.

The lists reported are what ColBERTv2 returned (the ``rm`` is watched by a recorder that passes
its results through); the context, the passages ``Retrieve`` handed to the predictor. DSPy's
request cache sits inside ``ColBERTv2.__call__``: a cached query makes the same spans without an
HTTP request, so DSPY_CACHEDIR is a fresh directory and the server counts the requests it answered.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from openinference.instrumentation import using_attributes
from openinference.instrumentation.dspy import DSPyInstrumentor
from otel_export import arguments, load_plan, one_trace, provider, report

args = arguments()
plan = load_plan(args)
cache = tempfile.TemporaryDirectory(prefix="dspy-cache-", ignore_cleanup_errors=True)
os.environ["DSPY_CACHEDIR"] = cache.name  # read when dspy is first imported, by the instrumentor
tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
DSPyInstrumentor().instrument(tracer_provider=tracer_provider)

import dspy  # noqa: E402  (instrumented first, as the instrumentation asks)
from dspy.utils import DummyLM  # noqa: E402


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class ColBERTCompatible(BaseHTTPRequestHandler):
    """The ColBERTv2 server's search API over the plan's documents."""

    requests = 0

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        asked, k = words(query["query"][0]), int(query["k"][0])
        scored = [(len(asked & words(d["text"])), i, d) for i, d in enumerate(plan["documents"])]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        topk = [{"pid": d["doc_id"], "text": d["text"], "score": float(score), "rank": rank}
                for rank, (score, _, d) in enumerate(ranked, 1)]
        body = json.dumps({"topk": topk}).encode()
        ColBERTCompatible.requests += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


class Recorded:
    """Passes a retriever model's results through, keeping each list (with ColBERT's pids)."""

    def __init__(self, rm: Any) -> None:
        self.rm, self.seen = rm, []

    def __call__(self, query: str, k: int = 10, **kwargs: Any) -> Any:
        found = self.rm(query, k=k, **kwargs)
        self.seen.append([dict(p) for p in found])
        return found


class RAG(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.retrieve = dspy.Retrieve(k=2)
        self.generate = dspy.Predict("context, question -> answer")
        self.contexts: list[list[str]] = []

    def forward(self, question: str) -> dspy.Prediction:
        context = self.retrieve(question).passages
        self.contexts.append(list(context))
        return self.generate(context=context, question=question)


server = ThreadingHTTPServer(("127.0.0.1", 0), ColBERTCompatible)
threading.Thread(target=server.serve_forever, daemon=True).start()
rm = Recorded(dspy.ColBERTv2(url=f"http://127.0.0.1:{server.server_port}"))
answers = [{"answer": f"The policies say so ({i})."} for i, _ in enumerate(plan["questions"], 1)]
dspy.configure(lm=DummyLM(answers), rm=rm)
program = RAG()
caller = plan["caller"]
questions = []


def documents_of(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": p["pid"], "content": p["text"], "metadata": {}, "score": p["score"]} for p in found]


def ask(question: str) -> dspy.Prediction:
    with using_attributes(user_id=caller["id"], metadata={"tenant": args.tenant, "groups": caller["groups"],
                                                           "index": plan["index"]}):
        return program(question=question)


for question in plan["questions"]:
    prediction, trace_id = one_trace(roots, lambda q=question: ask(q))
    found = documents_of(rm.seen[-1])
    by_text = {d["content"]: d for d in found}
    questions.append({"trace_id": trace_id, "question": question, "caller": caller, "lists": [found],
                      "context": [by_text[text] for text in program.contexts[-1]], "answer": prediction.answer})

server.shutdown()
report(tracer_provider, {"questions": questions, "colbert_requests": ColBERTCompatible.requests})
