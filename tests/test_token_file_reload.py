"""Tokens reloaded when the files they come from change, without SIGHUP: the configuration file and
a `file:` read token, each mounted as Kubernetes mounts a Secret or ConfigMap (the file a symlink
through ``..data``, which is swapped atomically to a new directory). A real `ragmon serve`, one
process from start to end, and a client sending all along never sees a request refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import yaml

from ragmon.monitor.app.secret_watch import FileWatch
from tests.ragmon_process import RagmonServer
from tests.test_token_rotation import NEW, OLD, READ_NEW, READ_OLD, SteadyClient, sent_more, status

READ_NEWER = "read-newer-0123456789"


class MountedVolume:
    """A directory laid out as the kubelet lays out a mounted Secret: the files in a timestamped
    directory, ``..data`` a symlink to it, and each file a symlink through ``..data``; an update
    writes a new directory and renames a new ``..data`` symlink over the old one."""

    def __init__(self, root: Path, files: dict[str, str]) -> None:
        self.root, self.generation = root, 0
        root.mkdir()
        self.update(files)
        for name in files:
            (root / name).symlink_to(Path("..data") / name)

    def update(self, files: dict[str, str]) -> None:
        self.generation += 1
        version = self.root / f"..2026_12_03_19_00_00.{self.generation:09d}"
        version.mkdir()
        for name, content in files.items():
            (version / name).write_text(content)
        previous = (self.root / "..data").resolve() if (self.root / "..data").exists() else None
        (self.root / "..data_tmp").symlink_to(version.name)
        os.replace(self.root / "..data_tmp", self.root / "..data")  # the one atomic step
        if previous is not None:
            for path in previous.iterdir():
                path.unlink()
            previous.rmdir()


def test_a_symlink_swap_is_a_change_and_nothing_else_is(tmp_path):
    volume = MountedVolume(tmp_path / "secret", {"token": "a", "other": "x"})
    changes = []
    watch = FileWatch(lambda: [volume.root / "token"], lambda: changes.append(1), interval=60)
    assert not watch.check()
    volume.update({"token": "a", "other": "x"})  # the same content, a new directory: reloaded (harmless)
    assert watch.check() and len(changes) == 1
    assert not watch.check()
    (tmp_path / "elsewhere").write_text("unwatched")
    assert not watch.check()
    volume.update({"token": "b", "other": "x"})
    assert watch.check() and len(changes) == 2


def wait_for(condition, what: str, server: RagmonServer) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"{what}:\n{server.log_path.read_text()}"
        time.sleep(0.05)


def test_tokens_rotate_when_their_mounted_files_change_without_sighup_restart_or_refused_request(tmp_path):
    secret = MountedVolume(tmp_path / "secret", {"read-acme": READ_OLD, "read-acme-next": READ_NEW})
    read_old, read_next = f"file:{secret.root / 'read-acme'}", f"file:{secret.root / 'read-acme-next'}"

    def config(http: dict) -> dict[str, str]:
        return {"ragmon.yaml": yaml.safe_dump({"http": {"reload_check_seconds": 0.2, **http}})}

    mounted = MountedVolume(tmp_path / "config", config({"token": OLD, "read_tokens": {read_old: ["acme"]}}))
    with RagmonServer(tmp_path, RAGMON_CONFIG=str(mounted.root / "ragmon.yaml")) as server:
        pid = server.process.pid
        findings = "/api/v1/findings"
        assert (status(server, OLD), status(server, NEW)) == (200, 401)
        assert (status(server, READ_OLD, findings), status(server, READ_NEW, findings)) == (200, 401)
        with SteadyClient(server.url, OLD) as client:
            mounted.update(config({"token": OLD, "token_next": NEW,
                                   "read_tokens": {read_old: ["acme"], read_next: ["acme"]}}))
            wait_for(lambda: status(server, NEW) == 200, "the next token was not taken up", server)
            assert (status(server, OLD), status(server, READ_NEW, findings)) == (200, 200)
            client.token = NEW  # the client moves to the next token at its own pace
            moved = client.sent + 2
            wait_for(lambda: client.sent >= moved, "the client sent nothing with the next token", server)

            mounted.update(config({"token": NEW, "read_tokens": {read_next: ["acme"]}}))
            wait_for(lambda: status(server, OLD) == 401, "the old token was not retired", server)
            assert (status(server, NEW), status(server, READ_OLD, findings), status(server, READ_NEW, findings)) == (
                200, 401, 200)

            # the read token's own file changes, the configuration file not
            secret.update({"read-acme": READ_OLD, "read-acme-next": READ_NEWER})
            wait_for(lambda: status(server, READ_NEWER, findings) == 200, "the read token file was not reread",
                     server)
            assert status(server, READ_NEW, findings) == 401
            sent_more(client, 5, "with the token in force at the end")
        assert server.process.pid == pid and server.process.poll() is None
        assert client.failures == []
        log = server.log_path.read_text()
        assert log.count("tokens reloaded from the configuration (a token file changed)") >= 3
        assert not any(secret in log for secret in (OLD, NEW, READ_OLD, READ_NEW, READ_NEWER))
