"""Hostile values read back through the CLI in a real terminal: a tenant, trace id, index name,
document id, group and question holding a clear-screen sequence, an OSC 8 hyperlink, a C1 CSI,
a bidi override, rich markup and a newline are stored by a real ``ragmon replay``, then each read
command runs as the ``ragmon`` console script on a pty with a colour TERM, and the bytes the
terminal would get are checked: rich's own colours, and nothing the data brought."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

import pytest

from ragmon.monitor.app.cli_output import visible

RAGMON = Path(sys.executable).parent / "ragmon"  # the console script, as a user runs it
HOSTILE = ("\x1b[2J\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07\x9b31m\u202e[link=http://evil.example/]x[/link]"
           "evil[/bold]\n\tend")
TENANT = "acme" + HOSTILE
TRACE_ID = "t-" + HOSTILE
STYLING = re.compile(r"\x1b\[[0-9;]*m")  # SGR: the colours and weights rich writes itself
COLUMNS = 2000  # wide enough that no cell is folded: the escaped values are checked whole


def _events(now: float) -> list[dict]:
    """A leak in the context (the catalog gives the document to group:payroll only): a finding
    and a permission_violation sample, every id and the question hostile."""
    passage = {"id": "p1" + HOSTILE, "doc_id": "payroll" + HOSTILE, "doc_version": "v2", "score": 0.9}
    return [
        {"type": "document", "doc_id": "payroll" + HOSTILE, "tenant": TENANT, "version": "v2",
         "modified_at": now - 3600, "acl": ["group:payroll"]},
        {"type": "trace", "trace_id": TRACE_ID, "time": now - 5, "tenant": TENANT,
         "caller": {"id": "u1", "groups": ["staff" + HOSTILE]}, "index": {"name": "hr" + HOSTILE},
         "query": "what does the ceo earn" + HOSTILE,
         "retrievals": [{"retriever": "vector", "passages": [passage]}], "context": [passage],
         "answer": {"text": "no idea", "citations": ["elsewhere" + HOSTILE]}},
    ]


def _seed(scratch: Path, events: list[dict], refused: int = 0) -> dict:
    """The environment of a ragmon database in ``scratch`` that a real ``ragmon replay`` filled
    with ``events``, of which ``refused`` are dead-lettered (into ``dead.jsonl``)."""
    environ = {**{k: v for k, v in os.environ.items()
                  if not k.startswith("RAGMON_") and k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")},
               "RAGMON_DATABASE__URL": f"sqlite:///{scratch / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(scratch / "dead.jsonl"), "TERM": "xterm-256color"}
    path = scratch / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    done = subprocess.run([str(RAGMON), "replay", str(path), "-o", "json"], env=environ, cwd=scratch,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == (1 if refused else 0), done.stderr  # replay exits 1 when it refused any
    assert sum(json.loads(done.stdout)["rejected"].values()) == refused, done.stdout
    return environ


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> tuple[Path, dict]:
    """A directory whose database holds the hostile events, and the environment that reads it."""
    scratch = tmp_path_factory.mktemp("terminal")
    return scratch, _seed(scratch, _events(time.time()))


def in_terminal(args: list[str], scratch: Path, environ: dict, timeout: float = 60) -> tuple[int, str]:
    """Run ``ragmon ARGS`` with stdin, stdout and stderr on a pty of :data:`COLUMNS` columns (raw:
    the bytes read are the bytes written); its exit status and everything it wrote."""
    master, slave = os.openpty()
    tty.setraw(slave)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    process = subprocess.Popen([str(RAGMON), *args], stdin=slave, stdout=slave, stderr=slave, env=environ,
                               cwd=scratch, start_new_session=True)
    os.close(slave)
    written = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert time.monotonic() < deadline, f"ragmon {args} wrote for over {timeout} s"
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as error:  # EIO: every holder of the slave side has closed it
                if error.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            written += chunk
    finally:
        os.close(master)
    return process.wait(timeout), written.decode()


def assert_inert(written: str, coloured: bool = True) -> str:
    """What the terminal got holds no sequence, C1 control or bidi override from the data (and,
    when ``coloured``, rich's colours: the pty was taken for a colour terminal); returns it
    without the colours."""
    assert STYLING.search(written) or not coloured, "no colour at all: the pty was not taken for a colour terminal"
    bare = STYLING.sub("", written)
    assert "\x1b" not in bare, f"an escape sequence other than rich's colours: {bare!r}"
    for char in ("\x9b", "\x9d", "\x07", "\u202e"):
        assert char not in bare, f"{char!r} written to the terminal: {bare!r}"
    return bare


def test_findings_list_shows_hostile_values_and_obeys_none(seeded):
    status, written = in_terminal(["findings", "list"], *seeded)
    bare = assert_inert(written)
    assert status == 0, bare
    assert visible(TENANT) in bare and visible(TRACE_ID) in bare  # shown, made visible
    assert "[link=http://evil.example/]x[/link]evil[/bold]" in bare  # markup printed as text


def test_trace_show_of_a_hostile_trace_id_obeys_none(seeded):
    status, written = in_terminal(["trace", "show", TRACE_ID], *seeded)
    bare = assert_inert(written)
    assert status == 0, bare
    assert f"trace {visible(TRACE_ID)}" in bare and "strata permission_violation" in bare
    status, written = in_terminal(["trace", "show", "nothing" + HOSTILE], *seeded)
    bare = assert_inert(written, coloured=False)  # one plain line
    assert status == 1 and f"no sample of trace nothing{visible(HOSTILE)}" in bare


@pytest.mark.parametrize("command", [["samples", "list"], ["samples", "stats"]])
def test_samples_list_and_stats_obey_none_and_succeed(seeded, command):
    status, written = in_terminal(command, *seeded)
    bare = assert_inert(written)
    assert status == 0, bare  # `evil[/bold]` in a tenant is text, not a closing tag without an opening one
    assert visible(TENANT) in bare


def test_markup_in_a_tenant_is_text_not_a_link(tmp_path):
    """Alone (no stray closing tag to break the table first), ``[link=…]`` in a tenant printed as
    markup was a live hyperlink."""
    tenant = "linked[link=http://evil.example/]here[/link]"
    environ = _seed(tmp_path, [{**event, "tenant": tenant} for event in _events(time.time())])
    status, written = in_terminal(["samples", "stats"], tmp_path, environ)
    bare = assert_inert(written)
    assert status == 0 and tenant in bare


def test_a_usage_error_naming_a_hostile_value_obeys_none(seeded):
    scratch, environ = seeded
    status, written = in_terminal(["samples", "pull", "--week", "2026" + HOSTILE], scratch, environ)
    bare = assert_inert(written, coloured=False)
    assert status == 2 and visible(HOSTILE) in bare, bare
    # a database path from the environment, named by the error that it does not exist
    missing = {**environ, "RAGMON_DATABASE__URL": f"sqlite:///{scratch / ('gone' + HOSTILE)}/ragmon.db"}
    status, written = in_terminal(["findings", "list"], scratch, missing)
    bare = assert_inert(written, coloured=False)
    assert status == 2 and f"no ragmon database at {visible(scratch / ('gone' + HOSTILE))}" in bare, bare


def test_json_output_is_exact_json_and_holds_no_control_character(seeded):
    for command in (["findings", "list", "-o", "json"], ["trace", "show", TRACE_ID, "-o", "json"]):
        status, written = in_terminal(command, *seeded)
        assert status == 0 and not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", written), written
        found = json.loads(written)
        rows = found["findings"]
        assert {row["tenant"] for row in rows} == {TENANT} and {row["trace_id"] for row in rows} == {TRACE_ID}
    assert found["sample"]["trace"]["query"].endswith(HOSTILE)  # the stored question, exactly


@pytest.mark.parametrize("value, printed", [
    ("acme", "acme"), ("caf\u00e9 \u65e5\u672c \U0001f600", "caf\u00e9 \u65e5\u672c \U0001f600"),  # printable: kept
    ("a\x1b[2Jb", "a\\x1b[2Jb"), ("\x00\x07\x7f", "\\x00\\x07\\x7f"), ("one\ntwo\tthree\r", "one\\ntwo\\tthree\\r"),
    ("\x9b31m\x9d8;;x", "\\x9b31m\\x9d8;;x"),
    ("\u202eevil\u2066\u2069\u200f\u061c", "\\u202eevil\\u2066\\u2069\\u200f\\u061c"),
    ("line\u2028para\u2029", "line\\u2028para\\u2029"),
    ("a\u200bb\ufeffc\U000e0041d", "a\\u200bb\\ufeffc\\U000e0041d"),  # invisible: two ids would look alike
    ("C:\\data\\x1b", "C:\\data\\x1b"),  # a backslash: as it is
])
def test_visible_escapes_what_steers_a_terminal_and_keeps_the_rest(value, printed):
    assert visible(value) == printed


def test_dead_letters_list_shows_an_edited_letter_and_obeys_none(tmp_path):
    """A letter's detail is ragmon's own words, but the file (or a topic message) can be edited:
    what ``dead-letters list`` prints of it is made visible like every other value."""
    refused = {"type": "trace", "trace_id": "refused", "time": time.time(), "index": {"name": "hr"}}  # no query
    environ = _seed(tmp_path, [refused], refused=1)
    letters = tmp_path / "dead.jsonl"
    letter = json.loads(letters.read_text().splitlines()[0])
    letters.write_text(json.dumps({**letter, "detail": "edited" + HOSTILE}) + "\n")
    status, written = in_terminal(["dead-letters", "list"], tmp_path, environ)
    bare = assert_inert(written)
    assert status == 0, bare
    assert "edited" + visible(HOSTILE) in bare



def test_an_error_of_several_lines_keeps_its_lines(seeded):
    """ragmon's own messages may name one bad key a line: each line is made visible, the breaks
    between them stay breaks."""
    scratch, environ = seeded
    status, written = in_terminal(["config", "check"], scratch,
                                  {**environ, "RAGMON_HTTP__PORT": "x", "RAGMON_HTTP__BOGUS": "1\x1b[2J"})
    bare = assert_inert(written, coloured=False)
    assert status == 2, bare
    lines = bare.replace("\r\n", "\n").splitlines()
    assert any(line.strip().startswith("http.port") for line in lines), bare
    assert any(line.strip().startswith("http.bogus") for line in lines) and "\\n" not in bare, bare
