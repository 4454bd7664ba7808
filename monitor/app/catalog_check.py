"""``ragmon catalog check``: does the catalog name the documents traffic serves?

A catalog that names documents differently from the chunks' metadata, versions them differently from
the indexer, or leaves their tenant out looks healthy on every gauge while judging nothing (or
judging everything wrong). This holds what traffic served (the digest of served documents,
``monitor/storage/served_documents.py``) against the catalog and reports, per index:

- the share of served passages whose document the catalog knows (ids compared by the join rule,
  which the decoder already applied to both sides), with the most served unknown ids, and a hint
  where a catalog id differs from one only by a leading folder;
- served versions of known documents that the catalog never knew (not the current version, not in
  its history, not what the index reported): all of them unknown means versions are computed
  differently at the source and at the indexer;
- the versions the index's entries hold (index events, index-entry sources) of known documents that
  the document never had: all of them unknown means the document source and the index-entry source
  compute versions differently, and a passage served without a version of its own, judged by its
  index entry's, is never found stale;
- with traffic of several tenants: documents served to a tenant whose catalog entry names no tenant
  (``default``), each such passage a leak of "another tenant" when it is not.
Ids are shown as every surface shows them (``Redactor.shown_id``).
"""

from __future__ import annotations

import posixpath
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ragmon.monitor.core.catalog import Catalog, IndexedState
from ragmon.monitor.storage.served_documents import Served

EXAMPLES = 10
DEFAULT_TENANT = "default"


@dataclass
class IndexCheck:
    """What one index served, held against the catalog."""

    index: str  # as shown
    passages: int = 0
    known: int = 0  # passages whose document the catalog knows
    unmatched: list[dict] = field(default_factory=list)  # {doc_id, passages, hint}, most served first
    unmatched_documents: int = 0
    versions_checked: int = 0  # (document, version) pairs served of known documents, with a version
    versions_unknown: int = 0  # of those, versions the catalog never knew
    version_examples: list[dict] = field(default_factory=list)  # {doc_id, served, catalog}
    entries_checked: int = 0  # live index entries of known documents
    entries_unknown: int = 0  # of those, versions the document never had
    entry_examples: list[dict] = field(default_factory=list)  # {doc_id, indexed, catalog}

    @property
    def known_share(self) -> float:
        return self.known / self.passages if self.passages else 1.0


@dataclass
class CheckReport:
    since: float
    tenants: list[str]  # the tenants traffic came from
    indexes: list[IndexCheck]
    tenantless: int = 0  # documents served to a tenant whose catalog entry names none
    tenantless_examples: list[dict] = field(default_factory=list)  # {doc_id, served_to}
    problems: list[str] = field(default_factory=list)


def check_catalog(served: Iterable[Served], catalog: Catalog, since: float, shown: Callable[[str], str],
                  min_known: float) -> CheckReport:
    """The report; ``problems`` names each finding that should fail a check (a known share under
    ``min_known``, served or indexed versions that never match, tenantless documents under multi-tenant
    traffic). Indexes are those traffic served and those the catalog holds entries of."""
    rows = list(served)
    tenants = sorted({row.tenant for row in rows})
    by_index: dict[str, list[Served]] = defaultdict(list)
    for row in rows:
        by_index[row.index].append(row)
    entries = _live_entries(catalog)
    hints = _Hints(catalog.documents)
    report = CheckReport(since, [shown(t) for t in tenants], [])
    for index in sorted(by_index.keys() | entries.keys()):
        check = _check_index(index, by_index.get(index, []), catalog, hints, shown)
        _check_entries(check, entries.get(index, []), catalog, shown)
        report.indexes.append(check)
    if len(tenants) > 1:
        _tenantless(rows, catalog, shown, report)
    for check in report.indexes:
        name = check.index
        if check.known_share < min_known:
            report.problems.append(f"{name}: the catalog knows the documents of {check.known_share:.0%} of the "
                                   f"passages served (under {min_known:.0%})")
        if check.versions_checked and check.versions_unknown == check.versions_checked:
            report.problems.append(f"{name}: no served version of a known document is one the catalog knows: "
                                   "the source and the indexer compute versions differently")
        if check.entries_checked and check.entries_unknown == check.entries_checked:
            report.problems.append(f"{name}: no version its {check.entries_checked} index entries hold is one the "
                                   "document source knows: the two sources compute versions differently, and "
                                   "passages without a version of their own are never found stale")
    if report.tenantless:
        report.problems.append(f"{report.tenantless} documents served to tenants {', '.join(report.tenants)} name "
                               "no tenant in the catalog: each passage of them counts as another tenant's")
    return report


def _check_index(index: str, rows: list[Served], catalog: Catalog, hints: _Hints,
                 shown: Callable[[str], str]) -> IndexCheck:
    check = IndexCheck(shown(index))
    unknown: Counter[str] = Counter()
    versions: dict[tuple[str, str], None] = {}
    for row in rows:
        check.passages += row.passages
        document = catalog.document(row.doc_id)
        if document is None:
            if not row.id_only:
                unknown[row.doc_id] += row.passages
            continue
        check.known += row.passages
        if row.version is not None:
            versions.setdefault((row.doc_id, row.version))
    check.unmatched_documents = len(unknown)
    for doc_id, passages in unknown.most_common(EXAMPLES):
        near = hints.near(doc_id)
        check.unmatched.append({"doc_id": shown(doc_id), "passages": passages,
                                "hint": None if near is None else _hint(*near, shown)})
    for doc_id, version in versions:
        check.versions_checked += 1
        document = catalog.document(doc_id)
        assert document is not None
        if version == document.version or version in document.history or \
                catalog.indexed_version(index, doc_id) == version:
            continue
        check.versions_unknown += 1
        if len(check.version_examples) < EXAMPLES:
            check.version_examples.append({"doc_id": shown(doc_id), "served": shown(version),
                                           "catalog": shown(document.version)})
    return check


def _live_entries(catalog: Catalog) -> dict[str, list[IndexedState]]:
    """The index entries still holding chunks, by index."""
    by_index: dict[str, list[IndexedState]] = defaultdict(list)
    for entry in list(catalog.indexed.values()):
        if entry.chunks != 0:
            by_index[entry.index].append(entry)
    return by_index


def _check_entries(check: IndexCheck, entries: list[IndexedState], catalog: Catalog,
                   shown: Callable[[str], str]) -> None:
    for entry in sorted(entries, key=lambda e: e.doc_id):
        document = catalog.document(entry.doc_id)
        if document is None:
            continue
        check.entries_checked += 1
        if entry.version == document.version or entry.version in document.history:
            continue
        check.entries_unknown += 1
        if len(check.entry_examples) < EXAMPLES:
            check.entry_examples.append({"doc_id": shown(entry.doc_id), "indexed": shown(entry.version),
                                         "catalog": shown(document.version)})


def _tenantless(rows: list[Served], catalog: Catalog, shown: Callable[[str], str], report: CheckReport) -> None:
    served_to: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        document = catalog.document(row.doc_id)
        if document is not None and document.tenant == DEFAULT_TENANT and row.tenant != DEFAULT_TENANT:
            served_to[row.doc_id].add(row.tenant)
    report.tenantless = len(served_to)
    for doc_id in sorted(served_to)[:EXAMPLES]:
        report.tenantless_examples.append({"doc_id": shown(doc_id),
                                           "served_to": [shown(t) for t in sorted(served_to[doc_id])]})


class _Hints:
    """Catalog ids by their last path segment, to say which one an unknown id differs from by a
    leading folder (``/srv/corpus/hr/leave.md`` against ``hr/leave.md``)."""

    def __init__(self, documents: Iterable[str]) -> None:
        self._by_name: dict[str, list[str]] = defaultdict(list)
        for doc_id in documents:
            self._by_name[posixpath.basename(doc_id)].append(doc_id)

    def near(self, doc_id: str) -> tuple[str, str, bool] | None:
        """(catalog id, the leading folder one has more, whether traffic's id is the longer)."""
        for candidate in self._by_name.get(posixpath.basename(doc_id), [])[:100]:
            if doc_id.endswith("/" + candidate):
                return candidate, doc_id[: -len(candidate)], True
            if candidate.endswith("/" + doc_id):
                return candidate, candidate[: -len(doc_id)], False
        return None


def _hint(candidate: str, prefix: str, traffic_longer: bool, shown: Callable[[str], str]) -> str:
    if traffic_longer:
        return f"the catalog has {shown(candidate)}: give its source id_prefix {shown(prefix)}"
    return f"the catalog has {shown(candidate)}: its source's ids start with {shown(prefix)} (root or id_prefix)"
