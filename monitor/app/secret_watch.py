"""Tokens reloaded when the files they come from change, without a SIGHUP: the configuration file
(``RAGMON_CONFIG``) and the ``file:`` references of ``http.read_tokens`` are looked at every
``http.reload_check_seconds``, and a change reloads the tokens as SIGHUP does (``token_reload.py``).

A file is told changed by where it leads and what it is there (the path its symlinks resolve to,
the device, inode, size and modification time): Kubernetes updates a mounted Secret by writing a
new directory and swapping the ``..data`` symlink the files lead through, so a file's own
modification time may not move, but where it resolves does. Polling, not inotify: it sees that
swap, works on every file system a Secret or ConfigMap is mounted with, and costs a few ``stat``
calls a check.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ragmon.monitor.app.token_reload import TokenReload
from ragmon.monitor.config.settings import Settings

log = logging.getLogger(__name__)

Fingerprint = tuple[str, int, int, int, int] | None  # None: the file is not there (or not readable)


def fingerprint(path: Path) -> Fingerprint:
    """Where ``path`` leads and what is there: (resolved path, device, inode, size, mtime in ns)."""
    try:
        stat = os.stat(path)  # follows the symlinks: after a ..data swap, another inode
        return os.path.realpath(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns
    except OSError:
        return None


def token_files(settings: Settings, config_file: Path | None) -> list[Path]:
    """The files the tokens of ``settings`` come from: the configuration file, if one was read,
    and every ``file:`` reference of ``http.read_tokens``."""
    files = [config_file] if config_file is not None else []
    files += [Path(ref.partition(":")[2]) for ref in settings.http.read_tokens if ref.startswith("file:")]
    return files


class FileWatch:
    """Calls ``on_change`` when one of the files ``files()`` names changed since the last check
    (or one was added to or dropped from the list: a reload may name other files)."""

    def __init__(self, files: Callable[[], Sequence[Path]], on_change: Callable[[], object], interval: float) -> None:
        self._files = files
        self._on_change = on_change
        self._interval = interval
        self._seen = self._look(files())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="token-file-watch", daemon=True)

    @staticmethod
    def _look(files: Iterable[Path]) -> dict[Path, Fingerprint]:
        return {path: fingerprint(path) for path in files}

    def check(self) -> bool:
        """Look once; True (and ``on_change`` called) when something changed. What was seen is
        remembered whatever the reload made of it: a configuration refused (an ERROR says why) is
        tried again at its next change, not at every check."""
        seen = self._look(self._files())
        if seen == self._seen:
            return False
        self._seen = seen
        self._on_change()
        # the reload may have named other files (a read_tokens reference added): one not seen before
        # counts as changed at the next check (a reload more, never a change missed)
        self._seen = {path: seen.get(path) for path in self._files()}
        return True

    def start(self) -> FileWatch:
        """Check every ``interval`` seconds on a thread of its own, until :meth:`stop`."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.check()
            except Exception:  # a watch that dies would leave SIGHUP as the only way, silently
                log.exception("token file check failed; checking again in %s s", self._interval)

    def stop(self) -> None:
        self._stop.set()


def watch_token_files(reload: TokenReload, settings: Settings, config_file: Path | None) -> FileWatch | None:
    """Reload the tokens through ``reload`` whenever a file they come from changes, checked every
    ``http.reload_check_seconds`` (None when that is 0: SIGHUP only). ``config_file``: the file
    the configuration was read from, if any (``--config``, else ``RAGMON_CONFIG``)."""
    interval = settings.http.reload_check_seconds
    if not interval:
        return None
    if config_file is None and os.environ.get("RAGMON_CONFIG"):
        config_file = Path(os.environ["RAGMON_CONFIG"])
    return FileWatch(lambda: token_files(reload.loaded or settings, config_file),
                     lambda: reload.reload("a token file changed"), interval).start()
