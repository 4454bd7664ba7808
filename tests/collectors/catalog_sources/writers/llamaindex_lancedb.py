"""Index documents into a LanceDB database with LlamaIndex's `LanceDBVectorStore` (a `VectorStoreIndex` over a
`SentenceSplitter`'s nodes), as an app would, in the frameworks' environment (tests/clients/requirements.txt).
Prints, as one JSON line, what LlamaIndex and LanceDB answer: each document's node ids (the splitter's nodes, by
their `ref_doc_id`), and every row of the table as LanceDB's own client reads it back (id, LlamaIndex's `doc_id`
column and the metadata keys an indexer writes for the catalog), in the table's order.

    python llamaindex_lancedb.py PLAN.json   # {"uri": ..., "table": ...,
                                             #  "documents": {source: {"text": ..., "version": ..., "acl": "..."}}}

Each Document's id is its source path (`id_`), so the `doc_id` LlamaIndex writes into every node's metadata (its
ref doc id, over any `doc_id` of the application's) is the path too; its metadata: `source`, `doc_version`, `acl`
(a comma-separated string: LlamaIndex's stores take flat metadata only) and `indexed_at` (ISO 8601, UTC).
"""

import json
import sys
import warnings
from datetime import UTC, datetime

import lancedb
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.vector_stores.lancedb import LanceDBVectorStore

warnings.simplefilter("ignore")
KEYS = ("source", "doc_id", "doc_version", "acl", "indexed_at")


def main() -> None:
    with open(sys.argv[1]) as handle:
        plan = json.load(handle)
    store = LanceDBVectorStore(uri=plan["uri"], table_name=plan["table"])
    documents = [Document(text=document["text"], id_=source, metadata={
                     "source": source, "doc_version": document["version"], "acl": document["acl"],
                     "indexed_at": datetime.now(UTC).isoformat()})
                 for source, document in plan["documents"].items()]
    nodes = SentenceSplitter(chunk_size=120, chunk_overlap=0).get_nodes_from_documents(documents)
    VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                     embed_model=MockEmbedding(embed_dim=8))
    made: dict[str, list[str]] = {}
    for node in nodes:
        made.setdefault(node.ref_doc_id, []).append(node.node_id)
    table = lancedb.connect(plan["uri"]).open_table(plan["table"])
    rows = [{"id": row["id"], "doc_id": row["doc_id"], "metadata": {k: row["metadata"].get(k) for k in KEYS}}
            for row in table.to_arrow().select(["id", "doc_id", "metadata"]).to_pylist()]
    print(json.dumps({"nodes": made, "rows": rows, "columns": table.schema.names}))


if __name__ == "__main__":
    main()
