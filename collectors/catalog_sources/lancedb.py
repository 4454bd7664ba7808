"""The LanceDB source: what a LanceDB database holds of each document, as index entries (docs/catalog.md,
"A LanceDB database").

LanceDB keeps each table of a database directory (``lancedb.connect(path)``) as a Lance dataset, the
folder ``TABLE.lance``. It is read with Lance's own reader (``pylance``, module ``lance``: the
``lancedb`` extra), imported here only, when a sync runs:

- the dataset is opened once, at its latest version, so a table is read as it was at one moment (a
  writer meanwhile makes a new version, which the next sync reads); nothing is ever written;
- its rows are counted first: more than ``max_chunks`` fail the sync before anything is read;
- only the metadata keys configured are read (``ChunkKeys.all``), as the fields of the struct
  column ``metadata_column`` (where LangChain's and LlamaIndex's stores keep a chunk's metadata) or
  as columns of their own: never the vectors or the text. A key the table's schema lacks is absent
  from every chunk (a missing ``doc_id_key`` refuses every row, ``bad_record``);
- the rows, in the dataset's order (the order they were added), fold into one entry per document
  (``chunk_fold``), under the table's index name.

A table that is missing, or that cannot be read whole, fails the sync: a store read in part is not
a list of removals.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.chunk_fold import ChunkKeys, fold_collections
from ragmon.monitor.config.catalog_sources import LanceDbSourceConfig

EXTRA_HINT = 'pip install "ragmon[lancedb]"'


class LanceDbSource:
    """A LanceDB database as index entries (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: LanceDbSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._context = context
        self._keys = ChunkKeys.of(config)

    def read(self) -> Snapshot:
        lance = _lance()
        return fold_collections(self._config, self._keys, lambda table: list(self._chunks(lance, table)),
                                self._context.clock(), what="table")

    def _chunks(self, lance: Any, table: str) -> Iterator[dict[str, Any]]:
        """The metadata (the configured keys alone) of every row of ``table``, in the dataset's order."""
        config = self._config
        folder = Path(config.path).expanduser() / f"{table}.lance"
        if not folder.is_dir():
            raise SourceError("unavailable", f"table {table!r} not found: no folder {folder} (is path the "
                              "directory given to lancedb.connect?)")
        try:
            dataset = lance.dataset(str(folder))
            rows = dataset.count_rows()
            if rows > config.max_chunks:
                raise SourceError("too_large", f"table {table!r} holds {rows} chunks, more than max_chunks "
                                  f"({config.max_chunks})")
            projection = self._projection(dataset.schema, table)
            if not projection:  # no key is in the schema: every row lacks its document id
                yield from ({} for _ in range(rows))
                return
            read = 0
            for batch in dataset.to_batches(columns=projection, batch_size=config.page_size, scan_in_order=True):
                for row in batch.to_pylist():
                    read += 1
                    yield {key: value for key, value in row.items() if value is not None}
        except SourceError:
            raise
        except Exception as error:  # Lance raises OSError, ValueError and errors of its own: each fails the sync
            raise SourceError("unavailable", f"table {table!r}: {type(error).__name__}: {error}"[:500]) from None
        if read != rows:
            raise SourceError("unavailable", f"table {table!r}: {read} rows read of {rows} counted")

    def _projection(self, schema: Any, table: str) -> dict[str, str]:
        """Output name (the metadata key) -> Lance's expression for it, for each configured key the
        schema holds."""
        column = self._config.metadata_column
        if column is None:
            return {key: f"`{key}`" for key in self._keys.all if key in schema.names}
        if column not in schema.names:
            raise SourceError("bad_format", f"table {table!r} has no column {column!r} (metadata_column); set "
                              "metadata_column to null when the metadata keys are columns of their own")
        import pyarrow.types  # brought by pylance, as the extra installs it

        struct = schema.field(column).type
        if not pyarrow.types.is_struct(struct):
            raise SourceError("bad_format", f"table {table!r}: column {column!r} (metadata_column) is not a struct of "
                              "metadata keys")
        names = {struct.field(n).name for n in range(struct.num_fields)}
        return {key: f"`{column}`.`{key}`" for key in self._keys.all if key in names}


def _lance() -> Any:
    """Lance's reader, imported when a sync runs (the configuration already checked it is installed)."""
    try:
        import lance
    except ImportError as error:
        raise SourceError("unavailable", f"kind lancedb needs the pylance package ({error}): {EXTRA_HINT}") from None
    return lance
