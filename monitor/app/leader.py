"""The scheduler lock: exactly one process runs the periodic jobs (docs/scheduler.md).

On PostgreSQL it is a session-level advisory lock held by a connection of its own: the lock goes
with the connection, so a process that dies (or loses the database) lets the next one take it.
Beside a SQLite file it is an exclusive ``flock`` on ``<database>.scheduler.lock``, released by
the kernel when the process dies. Both are tried without blocking; a waiting scheduler polls.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Protocol

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

# A fixed 64-bit key: the same in every ragmon process, unlikely to meet another application's.
ADVISORY_KEY = 0x7261676D6F6E3031  # "ragmon01"


class LeaderLock(Protocol):
    def try_acquire(self) -> bool:
        """Take the lock if free; True when held (also when already held)."""

    def still_held(self) -> bool:
        """Whether the lock is still ours (for PostgreSQL: the connection is alive)."""

    def release(self) -> None: ...


class PostgresLock:
    def __init__(self, url: str) -> None:
        self._engine: Engine = create_engine(url, poolclass=NullPool)
        self._connection = None

    def try_acquire(self) -> bool:
        if self._connection is not None:
            return self.still_held()
        connection = None
        try:
            connection = self._engine.connect()
            got = connection.execute(text("select pg_try_advisory_lock(:key)"), {"key": ADVISORY_KEY}).scalar()
            connection.commit()
        except Exception:
            if connection is not None:
                with contextlib.suppress(Exception):
                    connection.close()
            return False
        if got:
            self._connection = connection
            return True
        connection.close()
        return False

    def still_held(self) -> bool:
        if self._connection is None:
            return False
        try:
            self._connection.execute(text("select 1")).scalar()
            self._connection.commit()
            return True
        except Exception:
            self._drop()
            return False

    def release(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.execute(text("select pg_advisory_unlock(:key)"), {"key": ADVISORY_KEY})
                self._connection.commit()
            self._drop()

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for a human looking
        self._fd = fd
        return True

    def still_held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def leader_lock(database_url: str) -> LeaderLock:
    """The lock that fits the database: advisory on PostgreSQL, a file beside a SQLite database."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        database = url.database if url.database and url.database != ":memory:" else "ragmon-data/memory.db"
        return FileLock(Path(database + ".scheduler.lock"))
    return PostgresLock(database_url)
