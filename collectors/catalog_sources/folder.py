"""The folder source: one document per file of a folder or a git work tree (docs/catalog.md, "A folder
or a git work tree").

- id: ``id_prefix`` + the path relative to the root, POSIX, by the join rule;
- version: the git blob id of the bytes on disk (``git hash-object``), in git or not;
- changed time: for a file as committed, the last commit that touched it (``git log``); else mtime;
- readers: the front matter's ACL keys, else the nearest sidecar's up the tree, else ``default_acl``;
- tenant: the front matter's, else ``tenant_pattern`` on the path, else the nearest sidecar's, else ``tenant``.

Nothing outside the root is read: the walk holds each folder open and opens what is in it relative
to it (``os.fwalk``), and every path component is opened without following a symbolic link, so
neither a link nor a ``..`` can lead out; links are counted as refused. Files and front matter are
bounded in bytes, documents in count.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ragmon.collectors.catalog_sources.base import Snapshot, SourceContext, SourceError
from ragmon.collectors.catalog_sources.front_matter import (
    FrontMatterError,
    load_mapping,
    readers,
    split_front_matter,
    tenant_of,
)
from ragmon.collectors.catalog_sources.git import GitTree, blob_id
from ragmon.monitor.config.catalog_sources import FolderSourceConfig
from ragmon.monitor.core.doc_ids import join_key
from ragmon.monitor.core.model import DocumentEvent

log = logging.getLogger(__name__)

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class _Inherited:
    """What the sidecars from the root down to a folder say; ``broken``: one of them could not be read."""

    acl: tuple[str, ...] | None = None
    tenant: str | None = None
    broken: bool = False


@dataclass(frozen=True)
class _Read:
    """One file read: its version, changed time (mtime) and what its front matter says."""

    version: str
    mtime: float
    acl: list[str] | None
    tenant: str | None


class FolderSource:
    """A folder or git work tree as documents (:class:`~ragmon.collectors.catalog_sources.base.CatalogSource`)."""

    def __init__(self, config: FolderSourceConfig, context: SourceContext) -> None:
        self.name = config.name
        self._config = config
        self._pattern = re.compile(config.tenant_pattern) if config.tenant_pattern else None

    def read(self) -> Snapshot:
        config = self._config
        root = config.root.expanduser().resolve()
        if not root.is_dir():
            raise SourceError("unavailable", f"{root}: not a folder")
        snapshot = Snapshot(documents={})
        paths, inherited = self._walk(root, snapshot)
        paths.sort()
        for rel in paths[config.max_items:]:
            snapshot.refuse("too_many", self._doc_id(rel))
        kept = paths[: config.max_items]
        tree = GitTree.open(root, config.git_timeout_seconds) if config.git else None
        committed = tree.committed_blobs() if tree is not None else {}
        read: dict[str, _Read] = {}
        root_fd = os.open(root, _DIR_FLAGS)
        try:
            for rel in kept:
                parent = inherited.get(os.path.dirname(rel), _Inherited())
                if parent.broken:
                    snapshot.refuse("bad_front_matter", self._doc_id(rel))
                    continue
                outcome = self._read_file(root_fd, rel)
                if isinstance(outcome, str):
                    snapshot.refuse(outcome, self._doc_id(rel))  # type: ignore[arg-type]
                else:
                    read[rel] = outcome
        finally:
            os.close(root_fd)
        as_committed = [rel for rel, file in read.items() if committed.get(rel) == file.version]
        changed = tree.last_changed(as_committed) if tree is not None else {}
        for rel, file in read.items():
            parent = inherited.get(os.path.dirname(rel), _Inherited())
            acl = file.acl if file.acl is not None else (
                list(parent.acl) if parent.acl is not None else config.default_acl)
            doc_id = self._doc_id(rel)
            snapshot.documents[doc_id] = DocumentEvent(  # type: ignore[index]
                doc_id=doc_id, version=file.version, modified_at=changed.get(rel, file.mtime),
                tenant=file.tenant or self._tenant_by_path(rel) or parent.tenant or config.tenant,
                acl=list(acl) if acl is not None else None)
        return snapshot

    def _doc_id(self, rel: str) -> str:
        return join_key(self._config.id_prefix + rel)

    def _tenant_by_path(self, rel: str) -> str | None:
        if self._pattern is None:
            return None
        match = self._pattern.search(rel)
        return (match.group("tenant") or None) if match else None

    def _included(self, rel: str) -> bool:
        config = self._config
        return any(fnmatch.fnmatchcase(rel, p) for p in config.include) and not any(
            fnmatch.fnmatchcase(rel, p) for p in config.exclude)

    def _walk(self, root: Path, snapshot: Snapshot) -> tuple[list[str], dict[str, _Inherited]]:
        """The relative paths of the files to read, and what the sidecars say for each folder
        (by relative path, ``""`` the root). Links are counted, never followed."""
        config = self._config
        paths: list[str] = []
        inherited: dict[str, _Inherited] = {}
        for top, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
            rel_dir = os.path.relpath(top, root)
            rel_dir = "" if rel_dir == "." else Path(rel_dir).as_posix()
            here = self._sidecar(dir_fd, files, inherited.get(os.path.dirname(rel_dir), _Inherited())
                                 if rel_dir else _Inherited())
            inherited[rel_dir] = here
            for name in list(dirs):
                if name.startswith(".") or stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    dirs.remove(name)
                    if not name.startswith("."):
                        snapshot.refuse("symlink")
            for name in files:
                if name.startswith(".") or name == config.sidecar:
                    continue
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if not self._included(rel):
                    continue
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    snapshot.refuse("symlink", self._doc_id(rel))
                elif not stat.S_ISREG(mode):
                    snapshot.refuse("not_regular", self._doc_id(rel))
                else:
                    paths.append(rel)
        return paths, inherited

    def _sidecar(self, dir_fd: int, files: list[str], parent: _Inherited) -> _Inherited:
        """What holds for a folder: its sidecar's values over its parent's."""
        config = self._config
        if config.sidecar not in files or parent.broken:
            return parent
        try:
            fd = os.open(config.sidecar, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError:
            return _Inherited(broken=True)  # a link, or unreadable: what it says is unknown
        try:
            data = _read_bounded(fd, config.max_front_matter_bytes)
            if data is None:
                raise FrontMatterError("too large")
            values = load_mapping(data, config.max_front_matter_bytes)
            acl = readers(values, config.acl_keys)
            tenant = tenant_of(values, config.tenant_key)
        except (FrontMatterError, OSError):
            log.warning("catalog source %s: a sidecar %s could not be read; the documents below it keep their "
                        "last state", self.name, config.sidecar)
            return _Inherited(broken=True)
        finally:
            os.close(fd)
        return _Inherited(tuple(acl) if acl is not None else parent.acl, tenant or parent.tenant)

    def _read_file(self, root_fd: int, rel: str) -> _Read | str:
        """The file at ``rel`` under the root, or why it is refused."""
        config = self._config
        try:
            fd = _open_beneath(root_fd, rel)
        except OSError as error:  # a link put there since the walk is refused like one seen by it
            return "symlink" if error.errno == errno.ELOOP else "unreadable"
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                return "not_regular"
            data = _read_bounded(fd, config.max_file_bytes)
        except OSError:
            return "unreadable"
        finally:
            os.close(fd)
        if data is None:
            return "too_large"
        try:
            head = split_front_matter(data, config.max_front_matter_bytes)
            values = load_mapping(head, config.max_front_matter_bytes) if head is not None else {}
            acl = readers(values, config.acl_keys)
            tenant = tenant_of(values, config.tenant_key)
        except FrontMatterError:
            return "bad_front_matter"
        return _Read(blob_id(data), status.st_mtime, acl, tenant)


def _open_beneath(root_fd: int, rel: str) -> int:
    """``rel`` opened for reading under the folder ``root_fd``, one component at a time, none of
    them followed if it is a link (ELOOP), none of them ``..``: what is opened is beneath the root."""
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):  # the walk never makes one; nothing else may
        raise OSError(errno.EINVAL, "not a plain relative path", rel)
    fd = root_fd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = nxt
        return os.open(parts[-1], _OPEN_FLAGS, dir_fd=fd)
    finally:
        if fd != root_fd:
            os.close(fd)


def _read_bounded(fd: int, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``fd``; None when there are more."""
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
