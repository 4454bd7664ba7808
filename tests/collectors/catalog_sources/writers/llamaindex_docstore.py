"""Index a folder with LlamaIndex and persist its storage (docstore.json among it), as an app would, in the
frameworks' environment (tests/clients/requirements.txt). A second run loads the persisted storage and brings
it level with the folder as LlamaIndex does (`refresh_ref_docs`, `delete_ref_doc`). Prints, as one JSON line,
what LlamaIndex answers: per source document its nodes (`ref_doc_info`) and hash (`get_document_hash`), and
which documents `refresh_ref_docs` re-indexed.

    python llamaindex_docstore.py PLAN.json   # {"corpus": ..., "persist": ..., "acl": {relative path: acl},
                                              #  "versions": {relative path: version}, "delete": [relative path]}
"""

import json
import os
import sys
import warnings

from llama_index.core import Settings, SimpleDirectoryReader, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.node_parser import SentenceSplitter

warnings.simplefilter("ignore")


def main() -> None:
    with open(sys.argv[1]) as handle:
        plan = json.load(handle)
    Settings.embed_model = MockEmbedding(embed_dim=8)
    Settings.node_parser = SentenceSplitter(chunk_size=16, chunk_overlap=0)
    corpus, persist = plan["corpus"], plan["persist"]
    documents = SimpleDirectoryReader(corpus, recursive=True, filename_as_id=True).load_data()
    for document in documents:
        relative = os.path.relpath(document.metadata["file_path"], corpus)
        if relative in plan.get("acl", {}):
            document.metadata["acl"] = plan["acl"][relative]
        if relative in plan.get("versions", {}):
            document.metadata["doc_version"] = plan["versions"][relative]
        if "indexed_at" in plan:
            document.metadata["indexed_at"] = plan["indexed_at"]
        # the metadata is not text to embed: the splitter then cuts the text alone, whatever the paths' length
        document.excluded_embed_metadata_keys = list(document.metadata)
        document.excluded_llm_metadata_keys = list(document.metadata)
    refreshed = None
    if os.path.exists(os.path.join(persist, "docstore.json")):
        index = load_index_from_storage(StorageContext.from_defaults(persist_dir=persist))
        refreshed = index.refresh_ref_docs(documents)
        refreshed = {document.id_: flag for document, flag in zip(documents, refreshed, strict=True)}
        for relative in plan.get("delete", []):
            index.delete_ref_doc(os.path.join(corpus, relative), delete_from_docstore=True)
    else:
        index = VectorStoreIndex.from_documents(documents)
    index.storage_context.persist(persist_dir=persist)
    docstore = index.docstore
    info = {ref_id: {"node_ids": list(ref.node_ids), "metadata": ref.metadata,
                     "doc_hash": docstore.get_document_hash(ref_id)}
            for ref_id, ref in index.ref_doc_info.items()}
    print(json.dumps({"ref_doc_info": info, "refreshed": refreshed,
                      "persisted_mtime": os.stat(os.path.join(persist, "docstore.json")).st_mtime}))


if __name__ == "__main__":
    main()
