"""The folder source on real folders and a real git repository; expected values from the files on disk
and from git's own output (``git hash-object``, ``git log -1 --format=%ct``)."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from ragmon.collectors.catalog_sources.base import SourceContext
from ragmon.collectors.catalog_sources.folder import _DIR_FLAGS, FolderSource, _open_beneath
from ragmon.monitor.config.catalog_sources import FolderSourceConfig
from tests.collectors.catalog_sources.gitrepo import GitRepo, front_matter


def read(root: Path, **options):
    config = FolderSourceConfig(name="docs", kind="folder", root=root, **options)
    return FolderSource(config, SourceContext(time.time, {})).read()


def on_disk(root: Path) -> set[str]:
    """The relative paths of the files a person sees in the folder (no hidden ones)."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def hash_object(path: Path) -> str:
    return subprocess.run(["git", "hash-object", "--no-filters", str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> GitRepo:
    repo = GitRepo(tmp_path / "corpus")
    repo.write("acme/leave.md", front_matter("Ten days carry over.", acl=["group:staff", "group:hr"]))
    repo.write("acme/pay.md", front_matter("Paid monthly.", groups=["payroll"], users=["u-7"]))
    repo.write("acme/hr/.ragmon.yaml", "acl: [group:hr]\ntenant: acme-hr\n")
    repo.write("acme/hr/review.md", "No front matter: the sidecar says who reads it.\n")
    repo.write("globex/handbook.md", "Nothing says who reads it.\n")
    repo.commit("first", "2026-03-01T10:00:00+00:00")
    repo.write("acme/pay.md", front_matter("Paid every two weeks.", groups=["payroll"]))
    repo.commit("pay", "2026-04-02T08:30:00+00:00")
    return repo


def test_a_git_work_tree_becomes_documents_as_git_sees_them(repo):
    repo.write("acme/leave.md", front_matter("Twelve days carry over.", acl=["group:hr"]))  # not committed
    snapshot = read(repo.root, acl_keys={"acl": "", "groups": "group:", "users": "user:"},
                    tenant_pattern=r"^(?P<tenant>[^/]+)/", default_acl=["group:all-staff"])
    documents = snapshot.documents
    assert set(documents) == on_disk(repo.root) == {"acme/leave.md", "acme/pay.md", "acme/hr/review.md",
                                                     "globex/handbook.md"}
    for rel, document in documents.items():
        assert document.version == repo.blob(rel), rel
    # committed as it is: the last commit that touched it; changed since: its mtime
    assert documents["acme/pay.md"].modified_at == repo.changed("acme/pay.md") == 1775118600.0
    assert documents["acme/hr/review.md"].modified_at == repo.changed("acme/hr/review.md") == 1772359200.0
    assert documents["acme/leave.md"].modified_at == os.stat(repo.root / "acme/leave.md").st_mtime
    assert documents["acme/leave.md"].acl == ["group:hr"]
    assert documents["acme/pay.md"].acl == ["group:payroll"]
    assert documents["acme/hr/review.md"].acl == ["group:hr"]  # the sidecar, inherited downward
    assert documents["globex/handbook.md"].acl == ["group:all-staff"]  # default_acl
    # the front matter, else the path pattern, else a sidecar: the pattern names acme before the sidecar
    assert {d.doc_id: d.tenant for d in documents.values()} == {
        "acme/leave.md": "acme", "acme/pay.md": "acme", "acme/hr/review.md": "acme", "globex/handbook.md": "globex"}
    assert not snapshot.refused and not any(d.deleted for d in documents.values())


def test_tenant_order_front_matter_then_pattern_then_sidecar_then_the_configured_one(tmp_path):
    root = tmp_path / "docs"
    (root / "team").mkdir(parents=True)
    (root / "team/.ragmon.yaml").write_text("tenant: from-sidecar\n")
    (root / "team/a.md").write_text(front_matter("a", tenant="from-front-matter"))
    (root / "team/b.md").write_text("b\n")
    (root / "c.md").write_text("c\n")
    documents = read(root, tenant="configured").documents
    assert {k: d.tenant for k, d in documents.items()} == {
        "team/a.md": "from-front-matter", "team/b.md": "from-sidecar", "c.md": "configured"}
    patterned = read(root, tenant="configured", tenant_pattern=r"^(?P<tenant>team)/").documents
    assert patterned["team/b.md"].tenant == "team" and patterned["c.md"].tenant == "configured"


def test_a_plain_folder_takes_mtimes_and_the_same_versions(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.txt").write_bytes(b"alpha\r\n\x00binary too")
    os.utime(root / "a.txt", (1_780_000_000.5, 1_780_000_000.5))
    documents = read(root, id_prefix="./kb//").documents
    [(doc_id, document)] = documents.items()
    assert doc_id == "kb/a.txt"  # the id prefix goes through the join rule too
    assert document.version == hash_object(root / "a.txt")
    assert document.modified_at == 1_780_000_000.5 and document.acl is None and document.tenant == "default"


def test_include_and_exclude_patterns_and_hidden_files(tmp_path):
    root = tmp_path / "docs"
    for rel in ("a.md", "b.txt", "deep/c.md", "deep/drafts/d.md", ".hidden.md", ".git/config", "deep/.cache/e.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    documents = read(root, include=["*.md"], exclude=["*/drafts/*"]).documents
    assert set(documents) == {"a.md", "deep/c.md"}


def test_nothing_outside_the_root_is_read_through_a_link(tmp_path):
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text("---\nacl: ['*']\n---\nnot for the catalog\n")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "ok.md").write_text("fine\n")
    (root / "file-link.md").symlink_to(secret)
    (root / "dir-link").symlink_to(secret.parent, target_is_directory=True)
    (root / "inside-link.md").symlink_to(root / "ok.md")
    snapshot = read(root)
    assert set(snapshot.documents) == {"ok.md"}
    assert snapshot.refused == {"symlink": 3}
    assert hash_object(secret) not in {d.version for d in snapshot.documents.values()}
    # a linked file is there: it is not read, and not taken for deleted
    assert snapshot.unread == {"file-link.md", "inside-link.md"}


def test_a_folder_swapped_for_a_link_after_the_walk_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_text("secret")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "d").symlink_to(outside, target_is_directory=True)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        with pytest.raises(OSError) as raised:
            _open_beneath(root_fd, "d/x.md")
        assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)
    finally:
        os.close(root_fd)


def test_a_path_climbing_out_is_never_opened(tmp_path):
    (tmp_path / "outside.md").write_text("secret")
    root = tmp_path / "docs"
    (root / "d").mkdir(parents=True)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for rel in ("../outside.md", "d/../../outside.md", "/etc/passwd", "d//x", "./d"):
            with pytest.raises(OSError) as raised:
                _open_beneath(root_fd, rel)
            assert raised.value.errno == errno.EINVAL, rel
    finally:
        os.close(root_fd)


def test_files_beyond_the_size_and_the_count_are_refused_and_keep_their_state(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a", "b", "c", "d", "e"):
        (root / f"{name}.md").write_text(name * 10)
    (root / "big.md").write_bytes(b"x" * 101)
    snapshot = read(root, max_file_bytes=100, max_items=4)
    # ids in order: a b big c | d e beyond the count; big beyond the size
    assert set(snapshot.documents) == {"a.md", "b.md", "c.md"}
    assert snapshot.refused == {"too_many": 2, "too_large": 1}
    assert snapshot.unread == {"d.md", "e.md", "big.md"}


@pytest.mark.parametrize(("text", "why"), [
    ("---\nacl: &a [group:x]\nother: *a\n---\n", "an alias"),
    ("---\nacl: !!python/object/apply:os.system ['touch /tmp/pwned-by-front-matter']\n---\n", "a Python tag"),
    ("---\n- a list\n---\n", "not a mapping"),
    ("---\nacl: [group:x\n---\n", "not YAML"),
    ("---\nacl: [group:x]\nbody without a closing line\n", "never closed"),
    ("---\nacl: [1, 2]\n---\n", "readers not strings"),
    ("---\nacl: {a: b}\n---\n", "readers a mapping"),
    ("---\ntenant: [a]\n---\n", "a tenant not a string"),
    ("---\nx: '" + "y" * 300 + "'\n---\n", "over max_front_matter_bytes"),
])
def test_front_matter_that_is_not_small_plain_yaml_is_refused(tmp_path, text, why):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "bad.md").write_text(text)
    (root / "good.md").write_text("---\nacl: group:a, group:b\n---\nbody\n")
    snapshot = read(root, max_front_matter_bytes=256)
    assert snapshot.refused == {"bad_front_matter": 1}, why
    assert snapshot.unread == {"bad.md"}
    assert snapshot.documents["good.md"].acl == ["group:a", "group:b"]  # a comma-separated string
    assert not Path("/tmp/pwned-by-front-matter").exists()


def test_a_broken_sidecar_keeps_the_documents_below_it_as_they_were(tmp_path):
    root = tmp_path / "docs"
    (root / "locked/deeper").mkdir(parents=True)
    (root / "locked/.ragmon.yaml").write_text("acl: [group:hr\n")  # not YAML: who reads below is unknown
    (root / "locked/a.md").write_text("a")
    (root / "locked/deeper/b.md").write_text("b")
    (root / "open.md").write_text("c")
    snapshot = read(root, default_acl=["*"])
    assert set(snapshot.documents) == {"open.md"}  # never "*" for what the sidecar may have narrowed
    assert snapshot.unread == {"locked/a.md", "locked/deeper/b.md"}
    assert snapshot.refused == {"bad_front_matter": 2}


def test_a_nearer_sidecar_wins_and_an_empty_list_names_nobody(tmp_path):
    root = tmp_path / "docs"
    (root / "a/b").mkdir(parents=True)
    (root / ".ragmon.yaml").write_text("acl: ['*']\n")
    (root / "a/.ragmon.yaml").write_text("acl: []\n")
    (root / "top.md").write_text("t")
    (root / "a/mid.md").write_text("m")
    (root / "a/b/low.md").write_text("l")
    documents = read(root).documents
    assert documents["top.md"].acl == ["*"]
    assert documents["a/mid.md"].acl == [] and documents["a/b/low.md"].acl == []


def test_a_missing_root_fails_the_read(tmp_path):
    from ragmon.collectors.catalog_sources.base import SourceError

    with pytest.raises(SourceError) as raised:
        read(tmp_path / "nowhere")
    assert raised.value.reason == "unavailable"


def test_a_git_that_hangs_fails_the_read_within_the_timeout(repo, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hanging = bin_dir / "git"
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    # answers what git answers, but `git log` (the history walk) never ends
    hanging.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = log ] && exec sleep 30; done\nexec {real} "$@"\n')
    hanging.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    from ragmon.collectors.catalog_sources.base import SourceError

    started = time.monotonic()
    with pytest.raises(SourceError) as raised:
        read(repo.root, git_timeout_seconds=1.0)
    assert raised.value.reason == "timeout" and time.monotonic() - started < 10
