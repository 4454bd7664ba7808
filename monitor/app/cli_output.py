"""What every ``ragmon`` command shares on its way out: the consoles and the exit codes
(docs/cli.md lists them)."""

from __future__ import annotations

import sys

from rich.console import Console

OK = 0
FOUND = 1  # the command ran and found something wrong: rejected records, a failed gate, nothing found
USAGE = 2  # a wrong option, an unusable file or configuration, a database out of reach or behind the code
SOURCE_STOPPED = 3  # `serve`: a source stopped on its own (e.g. too many dead letters)
PORT_IN_USE = 4  # `serve`, `scheduler`: the address is taken or cannot be bound

WIDE = 100_000  # columns when stdout is not a terminal: table rows are never folded, a script can grep them

errors = Console(stderr=True, soft_wrap=True)  # a line is never folded: logs and scripts read it whole


def stdout() -> Console:
    """A console on stdout: the terminal's width on a terminal, else plain full-width lines."""
    return Console() if sys.stdout.isatty() else Console(width=WIDE)


def output_option(*formats: str):
    """``-o/--output``: how a read command prints what it found (the first format is the default)."""
    import click

    return click.option("-o", "--output", type=click.Choice(list(formats)), default=formats[0], show_default=True,
                        help=f"Print as {' or '.join(formats)} (on stdout).")
