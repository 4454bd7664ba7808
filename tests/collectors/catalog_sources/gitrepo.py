"""A real git repository made by a test, and what git itself says of it (the expected values)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class GitRepo:
    """A work tree at ``root`` with a committer of its own and commit times chosen by the test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "docs@example.com")
        self.git("config", "user.name", "Docs")

    def git(self, *args: str, when: str | None = None) -> str:
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
        if when is not None:
            env |= {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        done = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, text=True, check=True,
                              timeout=60)
        return done.stdout.strip()

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def commit(self, message: str, when: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message, when=when)

    def blob(self, rel: str) -> str:
        """What ``git hash-object`` prints for the file as it is on disk."""
        return self.git("hash-object", rel)

    def changed(self, rel: str) -> float:
        """The commit time of the last commit that touched ``rel`` (``git log -1 --format=%ct``)."""
        return float(self.git("log", "-1", "--format=%ct", "--", rel))


def front_matter(body: str, **keys) -> str:
    """A markdown document with YAML front matter holding ``keys`` (lists written as YAML flow lists)."""
    lines = ["---"]
    for key, value in keys.items():
        lines.append(f"{key}: [{', '.join(value)}]" if isinstance(value, list | tuple) else f"{key}: {value}")
    return "\n".join([*lines, "---", body, ""])
