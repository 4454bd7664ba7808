"""Files that hold what ragmon keeps about people (the store, dead letters, weekly exports, the
caller key) are readable by the owner alone: directories 0700, files 0600, set explicitly so the
umask does not decide, and kept so when a file is rewritten."""

from __future__ import annotations

import os
from pathlib import Path

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """``path`` as a directory, with every directory created here made 0700. Directories that
    already exist are left as they are (a mounted volume is the operator's)."""
    missing = []
    for parent in (path, *path.parents):
        if parent.exists():
            break
        missing.append(parent)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            continue  # made by another process meanwhile
        os.chmod(directory, DIRECTORY_MODE)
    return path


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    """A descriptor of ``path`` opened with ``flags``; the file is 0600 whatever it was before."""
    private_dir(path.parent)
    descriptor = os.open(path, flags, FILE_MODE)
    os.fchmod(descriptor, FILE_MODE)
    return descriptor


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (a 0600 file beside it, flushed to disk,
    then renamed): a crash leaves the old file or the new one, never a torn one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
