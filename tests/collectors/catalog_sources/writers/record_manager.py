"""Index documents into an in-memory vector store with LangChain's `index()` and a `SQLRecordManager`, as an
app would, in the frameworks' environment (tests/clients/requirements.txt). Prints, as one JSON line, what
LangChain answers: `index()`'s counts, the record manager's keys per source document (`list_keys`), its
clock before and after, and the record manager's table as SQLAlchemy writes it for PostgreSQL.

    python record_manager.py PLAN.json   # {"db": ..., "namespace": ..., "store": ..., "cleanup": ...,
                                         #  "key_encoder": "sha256" | "version", "documents": {source: [chunk, ...]},
                                         #  "versions": {source: version}}
"""

import hashlib
import json
import os
import sys
import warnings

from langchain_classic.indexes import SQLRecordManager, index
from langchain_classic.indexes._sql_record_manager import UpsertionRecord
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

warnings.simplefilter("ignore")


def version_key(document: Document) -> str:
    """The key `index()` records: the document's own version, then the chunk's content hash."""
    return f"{document.metadata['doc_version']}:{hashlib.sha256(document.page_content.encode()).hexdigest()[:16]}"


def main() -> None:
    with open(sys.argv[1]) as handle:
        plan = json.load(handle)
    manager = SQLRecordManager(plan["namespace"], db_url=f"sqlite:///{plan['db']}")
    manager.create_schema()
    embeddings = DeterministicFakeEmbedding(size=8)
    store = (InMemoryVectorStore.load(plan["store"], embeddings) if os.path.exists(plan["store"])
             else InMemoryVectorStore(embeddings))
    versions = plan.get("versions", {})
    documents = [Document(page_content=chunk, metadata={"source": source, **(
                     {"doc_version": versions[source]} if source in versions else {})})
                 for source, chunks in plan["documents"].items() for chunk in chunks]
    encoder = version_key if plan.get("key_encoder") == "version" else plan.get("key_encoder", "sha256")
    before = manager.get_time()
    result = index(documents, manager, store, cleanup=plan.get("cleanup", "full"), source_id_key="source",
                   key_encoder=encoder)
    after = manager.get_time()
    store.dump(plan["store"])
    sources = sorted(set(plan["documents"]) | set(plan.get("also_list", [])))
    keys = {source: sorted(manager.list_keys(group_ids=[source])) for source in sources}
    table = UpsertionRecord.__table__
    ddl = [str(CreateTable(table).compile(dialect=postgresql.dialect()))]
    ddl += [str(CreateIndex(ix).compile(dialect=postgresql.dialect())) for ix in sorted(table.indexes,
                                                                                    key=lambda ix: ix.name)]
    print(json.dumps({"result": result, "keys": keys, "all_keys": sorted(manager.list_keys()),
                      "time_before": before, "time_after": after, "postgresql_ddl": ddl}))


if __name__ == "__main__":
    main()
