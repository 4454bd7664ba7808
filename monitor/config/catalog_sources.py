"""The entries of ``catalog.sources``: the systems of record the catalog is read from (docs/catalog.md).

Each entry is one source with a ``name`` of its own (a metric label and the key its last snapshot is
kept under) and a ``kind`` that picks its model below. A kind is added with a model here (built on
:class:`SourceEntry`, listed in :data:`SOURCE_MODELS` and :data:`CatalogSourceConfig`) and a
module with one line in the registry of ``collectors/catalog_sources``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, field_validator, model_validator

from ragmon.monitor.config.secret_refs import SecretRef
from ragmon.monitor.config.section import ConfigSection, TimeZoneName

_SOURCE_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?", re.ASCII)
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class SourceEntry(ConfigSection):
    """What every catalog source has: a name, when it is synced, and how much it may delete at once."""

    name: str = Field(description="The source's name: a metric label (`source`) and the key of its last snapshot; "
                      "1-64 characters of letters, digits, `_ . : -`, unique among the sources.")
    interval_seconds: NonNegativeFloat = Field(
        300.0, description="How often the scheduler syncs the source (first at start); 0: only "
        "`ragmon catalog sync`.")
    max_deletion_share: float = Field(
        0.5, ge=0, le=1, description="Largest share of the documents (and index entries) of the last snapshot one "
        "sync may delete. A sync that would delete more is held: nothing changes, the sync counts as `held`, and "
        "`ragmon catalog sync --accept-deletions` applies it once. A source that vanishes (an empty folder, an "
        "empty manifest) is so never read as every document deleted.")
    max_items: PositiveInt = Field(
        100_000, description="Documents (or index entries) one snapshot holds at most; those beyond are refused "
        "(counted, `reason=\"too_many\"`), in the order of their ids.")

    @field_validator("name")
    @classmethod
    def _label_safe(cls, value: str) -> str:
        if not _SOURCE_NAME.fullmatch(value):
            raise ValueError("must be 1-64 characters of letters, digits, _ . : -")
        return value


class FolderSourceConfig(SourceEntry):
    """A folder or a git work tree: one document per file."""

    kind: Literal["folder"] = Field(description="`folder`.")
    root: Path = Field(description="The folder. Nothing outside it is read: symbolic links are not followed "
                       "(counted as refused, `reason=\"symlink\"`).")
    include: list[str] = Field(default_factory=lambda: ["*"], description="Glob patterns (fnmatch, where `*` also "
                               "crosses `/`) of the relative paths read, e.g. `[\"*.md\", \"*.txt\"]`.")
    exclude: list[str] = Field(default_factory=list, description="Glob patterns of relative paths left out. Files "
                               "and folders whose name starts with `.` are always left out (`.git`, the sidecars).")
    id_prefix: str = Field("", description="Put before each relative path to make the document id, so that the ids "
                           "are those the indexer wrote into the chunks' metadata (e.g. `corpus/`).")
    git: bool = Field(True, description="In a git work tree, a file as committed takes its changed time from the "
                      "last commit that touched it (`git log`); a file changed since, or not in git, takes its mtime.")
    git_timeout_seconds: PositiveFloat = Field(60.0, description="Time each git command may take.")
    acl_keys: dict[str, str] = Field(
        default_factory=lambda: {"acl": ""}, description="Front matter (and sidecar) keys that hold readers, each "
        "with the prefix given to a bare name in it: `{acl: \"\", groups: \"group:\", users: \"user:\"}` reads "
        "`groups: [hr]` as `group:hr`. A value is a list or a comma-separated string; `*` is everyone.")
    tenant_key: str = Field("tenant", description="Front matter (and sidecar) key that holds the tenant.")
    sidecar: str = Field(".ragmon.yaml", description="Name of the per-folder file (YAML mapping with the ACL keys "
                         "and the tenant key) whose values apply to every document below it that does not say "
                         "otherwise; the nearest one up the tree wins.")
    default_acl: list[str] | None = Field(None, description="ACL of a document that neither its front matter nor a "
                                          "sidecar gives one; unset: unknown.")
    tenant: str = Field("default", description="Tenant of a document that neither its front matter, a sidecar nor "
                        "`tenant_pattern` names.")
    tenant_pattern: str | None = Field(
        None, description="Regular expression with a group `tenant` searched in the relative path, e.g. "
        "`^(?P<tenant>[^/]+)/`; where it matches it names the tenant (before a sidecar and `tenant`, after the "
        "front matter).")
    max_file_bytes: PositiveInt = Field(16 * 1024 * 1024, description="Larger files are refused (counted, "
                                        "`reason=\"too_large\"`) and keep their last known state.")
    max_front_matter_bytes: PositiveInt = Field(64 * 1024, description="Front matter (and sidecars) larger than "
                                                "this are refused (`reason=\"bad_front_matter\"`).")

    @field_validator("tenant_pattern")
    @classmethod
    def _tenant_group(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            compiled = re.compile(value)
        except re.error as error:
            raise ValueError(f"not a valid regular expression: {error}") from None
        if "tenant" not in compiled.groupindex:
            raise ValueError("needs a named group `tenant`, e.g. ^(?P<tenant>[^/]+)/")
        return value

    @field_validator("acl_keys")
    @classmethod
    def _acl_keys(cls, keys: dict[str, str]) -> dict[str, str]:
        for key, prefix in keys.items():
            if not key:
                raise ValueError("an ACL key must not be empty")
            if prefix and not prefix.endswith(":"):
                raise ValueError(f"{key}: the prefix {prefix!r} must end with `:` (e.g. `group:`)")
        return keys


class ManifestFields(ConfigSection):
    """Which field (JSONL key or CSV column) holds each part of a document."""

    doc_id: str = Field("doc_id", description="The document id (required in every record).")
    version: str = Field("version", description="The version (required).")
    modified_at: str = Field("modified_at", description="When that version was made: RFC 3339 with an offset, or "
                             "Unix seconds (required).")
    acl: str | None = Field("acl", description="Readers: a list (`[]`: nobody), or a string split at "
                            "`acl_separator`; absent, null or an empty string in a record: unknown. null here: not "
                            "read.")
    tenant: str | None = Field("tenant", description="The tenant; absent in a record: the source's `tenant`.")
    deleted: str | None = Field("deleted", description="True (`true`, `1`, `yes`) when the document was deleted.")


class ManifestSourceConfig(SourceEntry):
    """A manifest that a system of record exports (Confluence, SharePoint, Drive): one document per JSONL line
    or CSV row, from a file or an HTTP(S) URL."""

    kind: Literal["manifest"] = Field(description="`manifest`.")
    path: Path | None = Field(None, description="The manifest file (or `url`).")
    url: str | None = Field(None, description="The manifest's URL: https, or http on a loopback address; its host "
                            "must be in `allowed_hosts`. No credentials in it: see `auth_header`.")
    format: Literal["jsonl", "csv"] = Field("jsonl", description="JSON Lines (one object per line) or CSV with a "
                                            "header row.")
    fields: ManifestFields = Field(default_factory=ManifestFields, description="Field names, e.g. `{doc_id: id, "
                                   "version: etag, modified_at: updated}`.")
    acl_separator: str = Field(",", min_length=1, description="Where a string ACL is split.")
    tenant: str = Field("default", description="Tenant of a record without one.")
    id_prefix: str = Field("", description="Put before each document id.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Hosts `url` (and any redirect) may name; "
                                     "a redirect elsewhere fails the sync.")
    auth_header: SecretRef | None = Field(
        None, description="Reference (`env:VARIABLE` or `file:/path`) to the `Authorization` header value sent with "
        "`url`, e.g. `Bearer …`; read at each sync, never logged.")
    timeout_seconds: PositiveFloat = Field(30.0, description="Time the whole download may take (connecting, "
                                           "waiting and reading).")
    max_bytes: PositiveInt = Field(64 * 1024 * 1024, description="Largest manifest read; a larger one fails the "
                                   "sync.")
    max_redirects: int = Field(3, ge=0, le=10, description="Redirects followed, each to an allowed host.")

    @model_validator(mode="after")
    def _one_place(self) -> ManifestSourceConfig:
        if (self.path is None) == (self.url is None):
            raise ValueError("set path or url, one of them")
        if self.url is not None:
            check_manifest_url(self.url, self.allowed_hosts)
        return self

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not _HOST.fullmatch(host) and host != "::1":
                raise ValueError(f"{host!r} is not a host name or address (no scheme, port or path)")
        return [host.lower() for host in hosts]


def check_manifest_url(url: str, allowed_hosts: list[str]) -> str:
    """``url`` when a manifest may be fetched from it (also each redirect): https, or http on a
    loopback host; a host in ``allowed_hosts``; no credentials in it. Raises ValueError naming what
    is wrong, never quoting a credential."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("url: must be an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("url: holds credentials; give them by reference in auth_header")
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError("url: names no host")
    if parts.scheme == "http" and host not in _LOOPBACK_HOSTS:
        raise ValueError(f"url: plain http to {host}; only https, or http on a loopback address")
    if host not in allowed_hosts:
        raise ValueError(f"url: the host {host} is not in allowed_hosts")
    return url


# --- index entries of vector stores ---------------------------------------------------------------------


class VectorStoreEntry(SourceEntry):
    """What every vector-store source has: the collections read, the chunk metadata keys that say what
    each chunk is of, and the bounds of reading a server."""

    collections: list[str] = Field(min_length=1, description="The collections read, by name; one missing fails the "
                                   "sync.")
    index_names: dict[str, str] = Field(default_factory=dict, description="The index (the name traces give it) of "
                                        "a collection whose name is not that index's, e.g. `{docs_v3: policies}`.")
    doc_id_key: str = Field("doc_id", description="Chunk metadata key of the document id (e.g. LangChain's "
                            "`source`, LlamaIndex's `file_path`); `id_prefix` is put before it, then the join rule. "
                            "A chunk without it is refused (`bad_record`).")
    id_prefix: str = Field("", description="Put before each document id.")
    version_key: str = Field("doc_version", description="Chunk metadata key of the version the indexer embedded "
                             "(the same the document source computes, e.g. the git blob id). Chunks of one "
                             "document holding several versions: the oldest is the entry's version.")
    acl_keys: dict[str, str] = Field(
        default_factory=lambda: {"acl": ""}, description="Chunk metadata keys that hold readers, each with the "
        "prefix given to a bare name in it (as the folder source's). A value is a list or a string read by the one "
        "ACL rule (comma-separated, or a JSON array). Chunks of one document that differ: the entry's ACL is all of "
        "them (whoever any chunk admits). No key on any chunk: unknown.")
    indexed_at_key: str | None = Field(
        "indexed_at", description="Chunk metadata key of the time the chunk was embedded (Unix seconds or "
        "milliseconds, ISO 8601 with an offset). Absent from every chunk of a version: the time of the first sync "
        "that saw that version.")
    embedding_model: str | None = Field(None, description="The embedding model the collections were embedded "
                                        "with, given to every entry (the stores do not keep it).")
    max_chunks: PositiveInt = Field(
        1_000_000, description="Chunks one collection may hold; more fail the sync (a collection read in part would "
        "show the rest as removed).")
    allowed_hosts: list[str] = Field(default_factory=list, description="Hosts `url` may name; a redirect is not "
                                     "followed.")
    timeout_seconds: PositiveFloat = Field(30.0, description="Time the whole read of a server may take.")
    max_bytes: PositiveInt = Field(256 * 1024 * 1024, description="Bytes a server's answers may hold in all in "
                                   "one sync; more fail it.")
    page_size: int = Field(1000, ge=1, le=100_000, description="Chunks asked of a server per request.")

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: list[str]) -> list[str]:
        return ManifestSourceConfig._host_names(hosts)

    @field_validator("acl_keys")
    @classmethod
    def _acl_keys(cls, keys: dict[str, str]) -> dict[str, str]:
        return FolderSourceConfig._acl_keys(keys)


class ChromaSourceConfig(VectorStoreEntry):
    """A Chroma vector store, as the index entries of its collections: a persistent directory (read-only, no
    Chroma needed) or a `chroma run` server (HTTP API v2). The chunks of one document (by `doc_id_key`) are one
    index entry."""

    kind: Literal["chroma"] = Field(description="`chroma`.")
    path: Path | None = Field(None, description="The persistent directory (`chromadb.PersistentClient(path=…)`), "
                              "holding `chroma.sqlite3`; opened read-only (or `url`).")
    url: str | None = Field(None, description="The server's base URL (`chroma run`), e.g. "
                            "`https://chroma.internal:8000`: https, or http on a loopback address; its host must "
                            "be in `allowed_hosts`. No credentials in it: see `auth_header`.")
    chroma_tenant: str = Field("default_tenant", description="Chroma's own tenant the collections are in.")
    chroma_database: str = Field("default_database", description="Chroma's database the collections are in.")
    auth_header: SecretRef | None = Field(
        None, description="Reference (`env:VARIABLE` or `file:/path`) to the `Authorization` header value sent to "
        "the server (Chroma's token auth: `Bearer …`); read at each sync, never logged.")

    @model_validator(mode="after")
    def _one_store(self) -> ChromaSourceConfig:
        if (self.path is None) == (self.url is None):
            raise ValueError("set path or url, one of them")
        if self.url is not None:
            check_manifest_url(self.url, self.allowed_hosts)
        return self


class QdrantSourceConfig(VectorStoreEntry):
    """A Qdrant server, as the index entries of its collections (REST API: scroll). The chunks (points) of one
    document are one index entry. Qdrant's local mode (`QdrantClient(path=…)`) is not read."""

    kind: Literal["qdrant"] = Field(description="`qdrant`.")
    url: str = Field(description="The server's base URL, e.g. `https://qdrant.internal:6333`: https, or http on a "
                     "loopback address; its host must be in `allowed_hosts`. No credentials in it: see `api_key`.")
    api_key: SecretRef | None = Field(None, description="Reference (`env:VARIABLE` or `file:/path`) to the API key "
                                      "sent as Qdrant's `api-key` header; read at each sync, never logged.")
    metadata_key: str | None = Field(
        None, description="The payload key holding the chunk's metadata when it is nested (LangChain's "
        "`QdrantVectorStore` keeps it under `metadata`); unset: the payload itself (LlamaIndex).")
    path: Path | None = Field(None, description="Not supported: Qdrant's local mode keeps points as Python pickles, "
                              "which ragmon never loads (loading one runs code); serve the collection with a Qdrant "
                              "server and give `url`.")

    @model_validator(mode="after")
    def _server_only(self) -> QdrantSourceConfig:
        if self.path is not None:
            raise ValueError("path: Qdrant's local mode is not read (its points are Python pickles, and loading "
                             "one runs code); serve the collection with a Qdrant server and give url")
        check_manifest_url(self.url, self.allowed_hosts)
        return self



#: LanceDB's own rule for table names (letters, digits, `_ - .`); a name that starts with `.` is refused too, so
#: that a table is always a folder of its own inside the database directory
_LANCE_TABLE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,254}", re.ASCII)


def lance_installed() -> bool:
    """Whether Lance's reader (`pylance`, module `lance`: the `lancedb` extra) can be imported; not imported here."""
    return importlib.util.find_spec("lance") is not None


class LanceDbSourceConfig(VectorStoreEntry):
    """A LanceDB database (a directory of tables, `lancedb.connect(path)`), as the index entries of its tables: only
    their metadata columns are read, with Lance's own reader (the `lancedb` extra: `pip install
    "ragmon[lancedb]"`). The chunks (rows) of one document are one index entry."""

    kind: Literal["lancedb"] = Field(description="`lancedb`. Needs the `lancedb` extra (`pip install "
                                     "\"ragmon[lancedb]\"`, which brings pylance and pyarrow).")
    path: Path = Field(description="The database directory (`lancedb.connect(path)`), holding each table as "
                       "`TABLE.lance`; read-only, at each table's latest version. `collections` are the tables.")
    metadata_column: str | None = Field(
        "metadata", min_length=1, description="The struct column that holds each chunk's metadata, its fields the "
        "metadata keys (LangChain's `LanceDB` and LlamaIndex's `LanceDBVectorStore` write `metadata`); null: the "
        "keys are columns of their own. Only the configured keys are read: never the vectors or the text.")
    page_size: int = Field(1000, ge=1, le=100_000, description="Rows read per batch. (`allowed_hosts`, "
                           "`timeout_seconds` and `max_bytes` are a server's bounds: they do not apply here.)")

    @field_validator("collections")
    @classmethod
    def _table_names(cls, tables: list[str]) -> list[str]:
        for table in tables:
            if not _LANCE_TABLE.fullmatch(table):
                raise ValueError(f"{table!r} is not a LanceDB table name (letters, digits, _ - ., not starting "
                                 "with .)")
        return tables

    @model_validator(mode="after")
    def _reader_installed(self) -> LanceDbSourceConfig:
        if not lance_installed():
            raise ValueError("kind lancedb reads Lance files with the pylance package, which is not installed: "
                             "pip install \"ragmon[lancedb]\"")
        keys = [self.doc_id_key, self.version_key, *self.acl_keys, self.indexed_at_key or "",
                self.metadata_column or ""]
        if any("`" in key for key in keys):
            raise ValueError("a metadata key or metadata_column of a lancedb source must not hold a backtick")
        return self

# -- index entries kept in SQL: the record manager, a SQL query --------------
# -- index entries kept in SQL and JSON: the record manager, a SQL query, a LlamaIndex docstore --------------

class SqlDatabase(ConfigSection):
    """Where a SQL index-entry source reads: a SQLite file or a database URL, the password by reference."""

    path: Path | None = Field(None, description="A SQLite file, opened read-only (or `url`).")
    url: str | None = Field(None, description="A SQLAlchemy URL, e.g. `postgresql+psycopg://ragmon@db:5432/rag` "
                            "(PostgreSQL needs the `postgres` extra). No password in it: see `password`.")
    password: SecretRef | None = Field(None, description="Reference (`env:VARIABLE` or `file:/path`) to the "
                                       "password for `url`; read at each sync, never logged.")
    timeout_seconds: PositiveFloat = Field(30.0, description="Time the query may run (PostgreSQL's "
                                           "`statement_timeout`; for SQLite, checked as it steps) and the time to "
                                           "connect.")
    max_rows: PositiveInt = Field(1_000_000, description="Rows one sync reads at most; a query returning more fails "
                                  "the sync (rows cut short are not a list of deletions).")

    @model_validator(mode="after")
    def _one_database(self) -> SqlDatabase:
        if (self.path is None) == (self.url is None):
            raise ValueError("set path (a SQLite file) or url, one of them")
        if self.url is not None:
            check_database_url(self.url)
        elif self.password is not None:
            raise ValueError("password: a SQLite file takes none")
        return self


def check_database_url(url: str) -> str:
    """``url`` when it names a database with no password in it; ValueError naming what is wrong
    (never quoting the URL, which may hold the password)."""
    match = re.fullmatch(r"([A-Za-z0-9_+]+)://(?:([^:@/]*)(?::([^@/]*))?@)?[^/]*(/.*)?", url)
    if match is None:
        raise ValueError("url: must be a SQLAlchemy URL such as postgresql+psycopg://user@host:5432/database")
    if match[3] is not None:
        raise ValueError("url: holds a password; give it by reference in password")
    return url


class RecordManagerSourceConfig(SourceEntry, SqlDatabase):
    """LangChain's indexing record manager (`SQLRecordManager`): which source document each indexed chunk came
    from (`group_id`), its hash (`key`) and when it was written (`updated_at`), in table `upsertion_record`."""

    kind: Literal["record_manager"] = Field(description="`record_manager`.")
    namespace: str = Field(min_length=1, description="The record manager's namespace (`SQLRecordManager(namespace, "
                           "...)`), e.g. `chroma/policies`.")
    index: str | None = Field(None, min_length=1, description="The index name passages are served under (the "
                              "trace's `index`); unset: the namespace.")
    id_prefix: str = Field("", description="Put before each `group_id` (the `source_id_key` value) to make the "
                           "document id.")
    version_pattern: str | None = Field(
        None, description="Regular expression with a group `version` searched in each record's `key`, when "
        "`index()` ran with a `key_encoder` that writes the document's version into the key (e.g. "
        "`^(?P<version>[0-9a-f]{40}):`); the document's version is that of its newest record. Unset: LangChain's "
        "own hashes: the key of a document's one record, or `sha256:` and the SHA-256 of its records' keys, "
        "sorted, one per line.")

    @field_validator("version_pattern")
    @classmethod
    def _version_group(cls, value: str | None) -> str | None:
        return _with_group(value, "version", r"^(?P<version>[0-9a-f]{40}):")


def _with_group(value: str | None, group: str, example: str) -> str | None:
    if value is None:
        return value
    try:
        compiled = re.compile(value)
    except re.error as error:
        raise ValueError(f"not a valid regular expression: {error}") from None
    if group not in compiled.groupindex:
        raise ValueError(f"needs a named group `{group}`, e.g. {example}")
    return value


class SqlColumns(ConfigSection):
    """Which column of the query's result holds each part of an index entry."""

    doc_id: str = Field("doc_id", description="The document id (required in every row).")
    version: str = Field("version", description="The version indexed (required).")
    indexed_at: str = Field("indexed_at", description="When it was indexed: a timestamp, Unix seconds or "
                            "milliseconds, or an ISO 8601 string (required).")
    acl: str | None = Field("acl", description="Readers the index holds: a list (a JSON array) or a string of "
                            "principals, read by the one ACL rule; null in a row: unknown. null here: not read.")
    index: str | None = Field(None, description="The index name; null here: the source's `index`.")


class SqlSourceConfig(SourceEntry, SqlDatabase):
    """Any SQL table or query that says what an index holds: one row per chunk (or per document)."""

    kind: Literal["sql"] = Field(description="`sql`.")
    query: str = Field(min_length=1, description="The query, run in a read-only transaction; rows of one document "
                       "fold into one index entry (chunks: the rows; version: the oldest row's; ACL: every row's "
                       "readers). Bound parameters are written `:name` and given in `parameters`.")
    parameters: dict[str, str] = Field(default_factory=dict, description="Values of the query's `:name` "
                                       "parameters, e.g. `{collection: policies}`.")
    columns: SqlColumns = Field(default_factory=SqlColumns, description="Column names of the result, e.g. "
                                "`{doc_id: source, version: doc_version}`.")
    index: str | None = Field(None, min_length=1, description="The index name of every row (or `columns.index`).")
    id_prefix: str = Field("", description="Put before each document id.")
    time_zone: TimeZoneName | None = Field(
        None, description="IANA zone of times without an offset (a `timestamp without time zone` column); unset: "
        "such rows are refused.")

    @model_validator(mode="after")
    def _index_named(self) -> SqlSourceConfig:
        if (self.index is None) == (self.columns.index is None):
            raise ValueError("set index or columns.index, one of them")
        return self


class DocstoreSourceConfig(SourceEntry):
    """A LlamaIndex document store persisted as JSON (`SimpleDocumentStore.persist`, `docstore.json`): each
    source document (`ref_doc_info`) with its hash (`doc_hash`) and the ids of its nodes."""

    kind: Literal["llamaindex_docstore"] = Field(description="`llamaindex_docstore`.")
    path: Path = Field(description="The persisted `docstore.json` (or the folder holding it).")
    index: str = Field(min_length=1, description="The index name passages are served under.")
    namespace: str = Field("docstore", min_length=1, description="The store's namespace (the prefix of its "
                           "collections, `docstore/ref_doc_info`).")
    doc_id_key: str | None = Field("file_path", description="Metadata key of a source document that holds its id "
                                   "(`file_path`, as `SimpleDirectoryReader` writes it); null: the document's own id "
                                   "(`ref_doc_id`).")
    id_prefix: str = Field("", description="Put before each document id.")
    version_key: str | None = Field(None, description="Metadata key that holds the version; null: LlamaIndex's "
                                    "`doc_hash`.")
    acl_key: str | None = Field("acl", description="Metadata key that holds the readers; absent: unknown.")
    indexed_at_key: str | None = Field(None, description="Metadata key that holds when the document was indexed; "
                                       "null: the file's modification time (when it was last persisted).")
    max_bytes: PositiveInt = Field(512 * 1024 * 1024, description="Largest `docstore.json` read; a larger one fails "
                                   "the sync.")


CatalogSourceConfig = Annotated[FolderSourceConfig | ManifestSourceConfig | ChromaSourceConfig | QdrantSourceConfig
                                | LanceDbSourceConfig | RecordManagerSourceConfig
                                | SqlSourceConfig | DocstoreSourceConfig, Field(discriminator="kind")]

#: every kind's model, for the generated reference (docs/configuration.md)
SOURCE_MODELS: tuple[type[SourceEntry], ...] = (FolderSourceConfig, ManifestSourceConfig, ChromaSourceConfig,
                                                QdrantSourceConfig, LanceDbSourceConfig, RecordManagerSourceConfig,
                                                SqlSourceConfig, DocstoreSourceConfig)
