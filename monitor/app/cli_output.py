"""What every ``ragmon`` command shares on its way out: the consoles, the exit codes (docs/cli.md
lists them), and the one rule by which a value reaches the terminal (:func:`visible`, :func:`shown`)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

# visible: each control, bidirectional or invisible format character of a value as its escape
# (``\\x1b``, ``\\n``, ``\\u202e``). Every value a command prints that it did not write itself (ids,
# tenants, reasons, file names, messages holding them) goes through it.
from ragmon.monitor.core.visible import visible

OK = 0
FOUND = 1  # the command ran and found something wrong: rejected records, a failed gate, nothing found
USAGE = 2  # a wrong option, an unusable file or configuration, a database out of reach or behind the code
SOURCE_STOPPED = 3  # `serve`: a source stopped on its own (e.g. too many dead letters)
PORT_IN_USE = 4  # `serve`, `scheduler`: the address is taken or cannot be bound

WIDE = 100_000  # columns when stdout is not a terminal: table rows are never folded, a script can grep them

errors = Console(stderr=True, soft_wrap=True)  # a line is never folded: logs and scripts read it whole


def shown(value: object, style: str = "") -> Text:
    """``value`` made :func:`visible`, as rich ``Text``: printed as it reads, never as markup (a
    ``[link=…]`` or ``[/bold]`` in a value is text). Table cells, titles and lines that hold a
    value are built from this, not from markup strings."""
    return Text(visible(value), style=style)


def error(message: object) -> None:
    """``error: MESSAGE`` on stderr, each line of the message :func:`shown`: ragmon's own messages
    may run to several lines (one per bad key), and a value inside a line still cannot steer the
    terminal."""
    lines = str(message).split("\n")
    errors.print(Text.assemble(("error:", "red"), " ", Text("\n").join(shown(line) for line in lines)))


def stdout() -> Console:
    """A console on stdout: the terminal's width on a terminal, else plain full-width lines."""
    return Console() if sys.stdout.isatty() else Console(width=WIDE)


def output_option(*formats: str):
    """``-o/--output``: how a read command prints what it found (the first format is the default)."""
    import click

    return click.option("-o", "--output", type=click.Choice(list(formats)), default=formats[0], show_default=True,
                        help=f"Print as {' or '.join(formats)} (on stdout).")
