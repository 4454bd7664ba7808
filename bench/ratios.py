"""A path that slows down fails `make bench`, whether its target is met or not.

Each throughput figure is divided by the decode ceiling: the decode loop's rate over the replay
file (``bench.replay.decode_ceiling``), measured in the same run just before that path's benchmark.
The machine is shared and its speed changes from hour to hour; a path's ratio to that ceiling
changes much less, so it is what sittings are compared by.

docs/performance.md holds the last sitting's ratios in a table under :data:`RECORD_MARKER`.
`make bench` reads it before it measures anything (a malformed record stops it at once, not after
40 minutes), measures a path again when a figure's ratio fell more than :data:`TOLERANCE` below the
recorded one (:func:`fallen`), keeps the better run (:func:`better`), and fails when that one fell
too, naming the figure and by how much (:func:`check`). A figure the record does not hold is
reported as new, not failed. After its run, `make bench` prints the run's own record, ready to
paste over the old one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

#: the ceiling's name among the figures
CEILING = "decode_records_per_second"

#: the figures compared with the record, in the record's order, with their units
RATED = {
    "replay_records_per_second": "records/s",
    "otlp_traces_per_second": "traces/s",
    "kafka_traces_per_second": "traces/s",
    "scale_out_rate_1": "traces/s",
    "scale_out_rate_2": "traces/s",
}

#: how far below the recorded ratio a figure may fall before the run fails
TOLERANCE = 0.15

RECORD = Path(__file__).parent.parent / "docs" / "performance.md"
RECORD_MARKER = "<!-- the last sitting's ratios: make bench compares with this table and prints its own -->"
HEADER = "| figure | measured | decode ceiling beside it | ratio to the decode ceiling |"
SEPARATOR = "|---|---|---|---|"


class MalformedRecord(ValueError):
    """The record in docs/performance.md cannot be read; the message says where and why."""


@dataclass(frozen=True)
class Measured:
    """A figure of this run and the decode ceiling measured beside it."""

    value: float
    ceiling: float

    @property
    def ratio(self) -> float:
        return self.value / self.ceiling


def parse_record(text: str, where: str = "docs/performance.md") -> dict[str, float]:
    """The ratio of each figure in the record that follows :data:`RECORD_MARKER` in ``text``.

    Raises :class:`MalformedRecord` naming the line at fault: no marker or two, a header or
    separator not as :data:`HEADER` and :data:`SEPARATOR`, a row without four cells, a figure
    that is not one of :data:`RATED` or is there twice, a ratio that is not a positive number.
    """
    lines = text.splitlines()
    marked = [number for number, line in enumerate(lines) if line.strip() == RECORD_MARKER]
    if len(marked) != 1:
        raise MalformedRecord(f"{where}: {len(marked)} lines hold the record's marker {RECORD_MARKER!r}, "
                              "one must (python -m bench prints the record after a run)")
    start = marked[0] + 1
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line.strip())
    if table[:2] != [HEADER, SEPARATOR]:
        found = " / ".join(table[:2]) or "no table"
        raise MalformedRecord(f"{where}, line {start + 1}: the record must start with {HEADER!r} and "
                              f"{SEPARATOR!r} right under its marker, found {found!r}")
    ratios: dict[str, float] = {}
    for number, row in enumerate(table[2:], start=start + 3):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) != 4:
            raise MalformedRecord(f"{where}, line {number}: a row of the record has 4 cells, this one "
                                  f"{len(cells)}: {row!r}")
        figure, ratio = cells[0], cells[3]
        if figure not in RATED:
            raise MalformedRecord(f"{where}, line {number}: {figure!r} is not a figure make bench rates "
                                  f"(one of {', '.join(RATED)})")
        if figure in ratios:
            raise MalformedRecord(f"{where}, line {number}: {figure} is in the record twice")
        try:
            value = float(ratio)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise MalformedRecord(f"{where}, line {number}: the ratio of {figure} must be a positive "
                                  f"number, not {ratio!r}")
        ratios[figure] = value
    if not ratios:
        raise MalformedRecord(f"{where}, line {start + 1}: the record holds no figure")
    return ratios


def read_record(path: Path | None = None) -> dict[str, float]:
    """:func:`parse_record` of the file at ``path`` (:data:`RECORD` by default)."""
    path = path or RECORD
    return parse_record(path.read_text(), str(path))


def fallen(measured: dict[str, Measured], recorded: dict[str, float]) -> list[str]:
    """The measured figures whose ratio fell more than :data:`TOLERANCE` below the recorded one."""
    return [figure for figure, now in measured.items()
            if figure in recorded and now.ratio / recorded[figure] - 1 < -TOLERANCE]


def better(first: dict[str, Measured], second: dict[str, Measured]) -> dict[str, Measured]:
    """Each figure's measurement of the two with the higher ratio to its ceiling."""
    return {figure: max((m for m in (first.get(figure), second.get(figure)) if m is not None),
                        key=lambda m: m.ratio) for figure in first.keys() | second.keys()}


def check(measured: dict[str, Measured], recorded: dict[str, float], where: str = "docs/performance.md") -> int:
    """Print each rated figure's ratio beside the recorded one; 1 when one fell more than
    :data:`TOLERANCE` below it, else 0. A figure not in the record is new; one not measured
    (a run of some benchmarks only) is said so; neither fails."""
    print(f"\nratios to the decode ceiling against the last sitting's record ({where}): "
          f"more than {TOLERANCE:.0%} below it fails")
    slower = []
    for figure in RATED:
        now, then = measured.get(figure), recorded.get(figure)
        if now is None:
            print(f"  {figure:28s} {'not measured':>10s}")
            continue
        shown = f"  {figure:28s} {now.ratio:>10.3g}"
        if then is None:
            print(f"{shown}  new: not in the record")
            continue
        change = now.ratio / then - 1
        if change < -TOLERANCE:
            verdict = f"SLOWER by {-change:.0%}"
            slower.append(f"{figure} fell {-change:.0%} below the last sitting's ratio to the decode ceiling "
                          f"({now.ratio:.3g} against {then:.3g})")
        else:
            verdict = "faster" if change > TOLERANCE else "held"
        print(f"{shown}  recorded {then:<8.3g} {change:+.0%}  {verdict}")
    for line in slower:
        print(f"make bench fails: {line}")
    return 1 if slower else 0


def record_markdown(measured: dict[str, Measured]) -> str:
    """This run's record, as :func:`parse_record` reads it: to paste over the old one after a
    sitting."""
    lines = [RECORD_MARKER, HEADER, SEPARATOR]
    for figure, unit in RATED.items():
        if figure in measured:
            now = measured[figure]
            lines.append(f"| {figure} | {now.value:,.0f} {unit} | {now.ceiling:,.0f} records/s | {now.ratio:.3g} |")
    return "\n".join(lines) + "\n"
