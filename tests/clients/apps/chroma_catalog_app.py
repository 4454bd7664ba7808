"""A folder of markdown documents indexed into a persistent Chroma store by LangChain's own loader
and splitter, then questions answered from that store, as an app that indexes its docs folder does.

``--mode ingest``: ``DirectoryLoader`` (``TextLoader``) reads ``plan["root"]``; each document's
front matter names its readers (``acl``); ``RecursiveCharacterTextSplitter`` cuts its body into
chunks, each upserted into the collection with the metadata an indexer writes for the catalog:
``doc_id`` (the loader's ``source``: the file's path), ``doc_version`` (the git blob id of the
file's bytes), ``acl`` (comma-separated, as LangChain's Chroma store needs scalars; a list when
``plan["acl_as_list"]``), ``indexed_at`` (ISO 8601, UTC).
``plan["paths"]`` limits it to some documents and ``plan["first_chunks"]`` to their first chunks
(a re-indexing cut short). Prints what Chroma's own client reads back: ``{"ids", "metadatas"}``.

``--mode ask``: Chroma instrumented by OpenLLMetry, each question under an OpenInference CHAIN root
(``user.id``, ``metadata`` with tenant, groups and index), the query's results the context. Prints
the questions with the trace each made and what Chroma returned.

Embeddings are the app's own (hashed word counts): no model.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from datetime import UTC, datetime
from typing import Any

from otel_export import arguments, load_plan, one_trace, provider, report

args = arguments(lambda parser: parser.add_argument("--mode", choices=("ingest", "ask"), required=True))
plan = load_plan(args)
DIMENSIONS, TOP_K = 64, 3


def embed(text: str) -> list[float]:
    counts = [0.0] * DIMENSIONS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        counts[zlib.crc32(word.encode()) % DIMENSIONS] += 1.0
    norm = sum(c * c for c in counts) ** 0.5 or 1.0
    return [c / norm for c in counts]


def blob_id(data: bytes) -> str:  # = git hash-object
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    import yaml

    if not text.startswith("---\n"):
        return {}, text
    head, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(head) or {}, body


def ingest() -> None:
    import chromadb
    from langchain_community.document_loaders import DirectoryLoader, TextLoader
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    loaded = DirectoryLoader(plan["root"], glob="**/*.md", loader_cls=TextLoader).load()
    splitter = RecursiveCharacterTextSplitter(chunk_size=plan.get("chunk_size", 120), chunk_overlap=0)
    collection = chromadb.PersistentClient(path=plan["persist"]).get_or_create_collection(
        plan["collection"], embedding_function=None, metadata={"hnsw:space": "cosine"})
    ids, texts, metadatas = [], [], []
    for document in loaded:
        source = document.metadata["source"]
        if plan.get("paths") is not None and not any(source.endswith("/" + p) for p in plan["paths"]):
            continue
        with open(source, "rb") as file:
            version = blob_id(file.read())
        front, body = split_front_matter(document.page_content)
        metadata = {"source": source, "doc_id": source, "doc_version": version,
                    "indexed_at": datetime.now(UTC).isoformat()}
        if front.get("acl") is not None:  # a list where the plan asks (Chroma 1.x keeps non-empty lists)
            metadata["acl"] = list(front["acl"]) if plan.get("acl_as_list") else ", ".join(front["acl"])
        chunks = splitter.split_documents([Document(page_content=body, metadata=metadata)])
        for n, chunk in enumerate(chunks[: plan.get("first_chunks")]):
            ids.append(f"{source}#{n}")
            texts.append(chunk.page_content)
            metadatas.append(chunk.metadata)
    collection.upsert(ids=ids, embeddings=[embed(t) for t in texts], documents=texts, metadatas=metadatas)
    held = collection.get(include=["metadatas"])
    print(json.dumps({"ids": held["ids"], "metadatas": held["metadatas"]}))


def ask() -> None:
    from opentelemetry.instrumentation.chromadb import ChromaInstrumentor

    tracer_provider, roots = provider(args.export, {"ragmon.tenant": args.tenant})
    ChromaInstrumentor().instrument(tracer_provider=tracer_provider)
    tracer = tracer_provider.get_tracer("rag-app")
    import chromadb  # instrumented first, as the instrumentation asks

    collection = chromadb.PersistentClient(path=plan["persist"]).get_collection(plan["collection"])
    caller = plan["caller"]

    def answer(question: str) -> list[dict[str, Any]]:
        metadata = {"tenant": args.tenant, "groups": caller["groups"], "index": plan["index"]}
        with tracer.start_as_current_span("rag-answer", attributes={
                "openinference.span.kind": "CHAIN", "input.value": question, "user.id": caller["id"],
                "metadata": json.dumps(metadata)}) as span:
            found = collection.query(query_embeddings=[embed(question)], n_results=TOP_K)
            context = [{"id": i, "metadata": m} for i, m in zip(found["ids"][0], found["metadatas"][0], strict=True)]
            span.set_attribute("output.value", f"From {len(context)} passages.")
            return context

    questions = []
    for question in plan["questions"]:
        context, trace_id = one_trace(roots, lambda q=question: answer(q))
        questions.append({"trace_id": trace_id, "question": question, "context": context})
    report(tracer_provider, {"questions": questions})


ingest() if args.mode == "ingest" else ask()
