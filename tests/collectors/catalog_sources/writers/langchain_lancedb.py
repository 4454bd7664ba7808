"""Index documents into a LanceDB database with LangChain's `LanceDB` vector store, as an app would, in the
frameworks' environment (tests/clients/requirements.txt). Prints, as one JSON line, what LangChain and LanceDB
answer: the ids `add_texts` returned, and every row of the table as LanceDB's own client reads it back (id and
metadata), in the table's order, with the table's version.

    python langchain_lancedb.py PLAN.json   # {"uri": ..., "table": ..., "mode": "overwrite" | "append",
                                            #  "documents": {source: {"chunks": [...], "version": ..., "acl": [...]}},
                                            #  "first_chunks": n (only the first n chunks of each),
                                            #  "delete_sources": [source, ...] (LangChain's delete by filter)}

Each chunk's metadata is what an indexer writes for the catalog: `source` and `doc_id` (the document), `doc_version`,
`acl` (a list; absent when the plan gives none) and `indexed_at` (ISO 8601, UTC, when it was embedded).
"""

import json
import sys
import warnings
from datetime import UTC, datetime

import lancedb
from langchain_community.vectorstores import LanceDB
from langchain_core.embeddings import DeterministicFakeEmbedding

warnings.simplefilter("ignore")


def main() -> None:
    with open(sys.argv[1]) as handle:
        plan = json.load(handle)
    store = LanceDB(uri=plan["uri"], embedding=DeterministicFakeEmbedding(size=8), table_name=plan["table"],
                    mode=plan.get("mode", "overwrite"))
    texts, metadatas, ids = [], [], []
    for source, document in plan.get("documents", {}).items():
        for n, chunk in enumerate(document["chunks"][: plan.get("first_chunks")]):
            metadata = {"source": source, "doc_id": source, "doc_version": document["version"],
                        "indexed_at": datetime.now(UTC).isoformat()}
            if document.get("acl") is not None:
                metadata["acl"] = document["acl"]
            texts.append(chunk)
            metadatas.append(metadata)
            ids.append(f"{source}#{document['version']}#{n}")
    added = store.add_texts(texts, metadatas=metadatas, ids=ids) if texts else []
    for source in plan.get("delete_sources", []):
        store.delete(filter=f"metadata.doc_id = '{source}'")
    table = lancedb.connect(plan["uri"]).open_table(plan["table"])
    rows = table.to_arrow().select(["id", "metadata"]).to_pylist()
    print(json.dumps({"added": added, "rows": rows, "version": table.version}))


if __name__ == "__main__":
    main()
