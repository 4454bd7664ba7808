"""What git knows of a folder in a work tree: the blob each committed file has, and when the last
commit that touched it was made.

git runs as a program of its own with fixed arguments (never through a shell, no argument from
the folder's content but paths git itself printed), in the folder, with a time limit per command,
no terminal prompt, no optional locks and no file-system monitor (a repository's config could name
one to run). Output is read with ``-z`` (names as they are, no quoting).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Collection
from pathlib import Path

from ragmon.collectors.catalog_sources.base import SourceError

_GIT_OPTIONS = ("-c", "core.fsmonitor=false", "-c", "core.quotepath=false", "--no-pager")
_READ_CHUNK = 64 * 1024


def blob_id(data: bytes) -> str:
    """The id git gives a blob of these bytes: what ``git hash-object --no-filters`` prints."""
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(b"blob %d\x00" % len(data))
    digest.update(data)
    return digest.hexdigest()


class GitTree:
    """git's view of ``root`` (a folder inside a work tree). Paths are relative to ``root``, POSIX."""

    def __init__(self, root: Path, timeout: float) -> None:
        self._root = root
        self._timeout = timeout

    @classmethod
    def open(cls, root: Path, timeout: float) -> GitTree | None:
        """The tree when ``root`` is inside a git work tree with git installed, else None."""
        tree = cls(root, timeout)
        try:
            inside = tree._run("rev-parse", "--is-inside-work-tree", check=False)
        except FileNotFoundError:
            return None  # git is not installed: a plain folder
        return tree if inside.strip() == b"true" else None

    def committed_blobs(self) -> dict[str, str]:
        """Relative path -> blob id of every file under ``root`` in ``HEAD`` (none before the first commit)."""
        if not self._run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).strip():
            return {}
        out = self._run("ls-tree", "-r", "-z", "HEAD")
        blobs = {}
        for entry in out.split(b"\x00"):
            if not entry:
                continue
            meta, _, name = entry.partition(b"\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == b"blob":
                blobs[os.fsdecode(name)] = parts[2].decode("ascii")
        return blobs

    def last_changed(self, paths: Collection[str]) -> dict[str, float]:
        """Relative path -> commit time (Unix seconds) of the newest commit that touched it, for
        each of ``paths`` git's history has; reads the log only as far as it must."""
        wanted = set(paths)
        found: dict[str, float] = {}
        if not wanted:
            return found
        command = ["git", *_GIT_OPTIONS, "log", "-z", "--no-renames", "--relative", "--format=%x01%ct",
                   "--name-only", "HEAD", "--", "."]
        with subprocess.Popen(command, cwd=self._root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, env=_environment()) as process:
            assert process.stdout is not None
            expired = threading.Event()

            def expire() -> None:  # a log that hangs is ended, not waited for
                expired.set()
                process.kill()

            timer = threading.Timer(self._timeout, expire)
            timer.start()
            pending = b""
            when: float | None = None
            try:
                while wanted:
                    chunk = process.stdout.read1(_READ_CHUNK)
                    if not chunk:
                        break
                    tokens = (pending + chunk).split(b"\x00")
                    pending = tokens.pop()
                    for token in tokens:
                        if token.startswith(b"\x01"):
                            when = float(token[1:])
                        elif token.strip(b"\n") and when is not None:
                            name = os.fsdecode(token.lstrip(b"\n"))
                            if name in wanted:
                                found[name] = when
                                wanted.discard(name)
            finally:
                timer.cancel()
                process.kill()  # done early: the rest of the log is not needed
        if expired.is_set() and wanted:
            raise SourceError("timeout", f"git log took more than {self._timeout:g} s")
        return found

    def _run(self, *args: str, check: bool = True) -> bytes:
        try:
            done = subprocess.run(["git", *_GIT_OPTIONS, *args], cwd=self._root, capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=self._timeout, env=_environment())
        except subprocess.TimeoutExpired:
            raise SourceError("timeout", f"git {args[0]} took more than {self._timeout:g} s") from None
        if check and done.returncode != 0:
            raise SourceError("git", f"git {args[0]} failed with status {done.returncode}")
        return done.stdout if done.returncode == 0 else b""


def _environment() -> dict[str, str]:
    """The process's environment without git's own variables (a GIT_DIR set for something else
    would point git elsewhere), and without prompts or optional locks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    return env
