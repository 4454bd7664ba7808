"""`make mutation`: mutmut over the modules that decide verdicts, against their fast tests.

    python -m tests.mutation [--jobs N] [--again] [MUTANT ...]

mutmut copies the tree into ``mutants/``, writes every mutant of a function into the copy behind a
switch, and puts ``mutants/`` (or ``mutants/src``) first on ``sys.path`` so that the tests import
the copy; a mutant is switched on by its module name, the one its path spells. Here path and name
differ (``monitor/`` is ``ragmon.monitor``: the ``package-dir`` of pyproject.toml), and the tests
would import the editable install's original. So the run happens in ``.mutation/``, a copy of the
tree laid out as installed: ``src/ragmon/`` holds ``ragmon/``, with ``monitor/``, ``collectors/``,
``exporters/`` and ``alerts/`` beneath it under their package names. From ``mutants/src`` first
on the path, ``import ragmon`` finds the mutated copy: the editable install's finder comes after
the path.

What is mutated and which tests run is mutmut's configuration, ``[tool.mutmut]`` in
pyproject.toml. A fresh run starts from nothing; ``--again`` brings the copy up to date with the
tree (changed tests and sources; after a source changed, the record of which tests call what is
made again from every test) and reruns the named mutants (shell patterns, e.g.
``'ragmon.alerts.state.*'``), or those not yet run; with ``--pending`` as well, only the named
mutants not yet run (mutmut reruns every mutant named, results or not). Prints the count per
module and each mutant that survived, with its diff.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
# the function part of a mutant's name: x_<function> or xǁ<class>ǁ<method>, then __mutmut_<n>
FUNCTION = re.compile(r"\.(x_|xǁ)[^.]*__mutmut_\d+$")


def lay_out(work: Path) -> bool:
    """Copy the tree into ``work`` as installed (pyproject's package-dir), with the tests and
    pyproject.toml beside it; files already there and unchanged are left as they are, so mutmut
    sees by their times which sources changed. Returns whether a source file changed."""
    pyproject = ROOT / "pyproject.toml"
    package_dir = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-dir"]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    changed = False

    def copy_source(source: str, target: str) -> None:
        nonlocal changed
        changed = _copy_if_changed(source, target) or changed

    # the outer packages first: ragmon/ is copied before ragmon/monitor/ is put inside it
    for package, folder in sorted(package_dir.items()):
        target = work / "src" / Path(*package.split("."))
        shutil.copytree(ROOT / folder, target, ignore=ignore, dirs_exist_ok=True, copy_function=copy_source)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore, dirs_exist_ok=True,
                    copy_function=_copy_if_changed)
    _copy_if_changed(pyproject, work / "pyproject.toml")
    return changed


def _copy_if_changed(source: str | Path, target: str | Path) -> bool:
    target = Path(target)
    if target.exists() and target.read_bytes() == Path(source).read_bytes():
        return False
    shutil.copy2(source, target)
    return True


def statuses(work: Path) -> dict[str, str]:
    """Every mutant's name and status (``killed``, ``survived``, ``no tests``, ``timeout``, ...),
    read from mutmut's records in ``work``."""
    os.chdir(work)  # mutmut reads its configuration and records from the working directory
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    found = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        found.update((name, status_by_exit_code[code]) for name, code in data.exit_code_by_key.items())
    return found


def module_of(mutant: str) -> str:
    return FUNCTION.split(mutant)[0]


# not caught: a mutant the tests ran and passed, and one no selected test reaches
NOT_CAUGHT = ("survived", "no tests")


def report(found: dict[str, str]) -> None:
    """The count per module and status, then the diff of each mutant not caught."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for mutant, status in found.items():
        by_module[module_of(mutant)][status] += 1
    total: Counter[str] = sum(by_module.values(), Counter())
    columns = ["killed", *NOT_CAUGHT, *sorted(set(total) - {"killed", *NOT_CAUGHT})]
    rows = [["module", "mutants", *columns]]
    for module, counts in [*sorted(by_module.items()), ("all", total)]:
        rows.append([module, str(counts.total()), *(str(counts[status]) for status in columns)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                        for i, (cell, width) in enumerate(zip(row, widths, strict=True))))
    for mutant in sorted(name for name, status in found.items() if status in NOT_CAUGHT):
        print(f"\n# {mutant}: {found[mutant]}")
        print(get_diff_for_mutant(mutant).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--again", action="store_true",
                        help="keep the previous run's results; rerun the named mutants or those not yet run")
    parser.add_argument("--pending", action="store_true",
                        help="with --again: of the mutants named, only those not yet run")
    parser.add_argument("mutants", nargs="*", help="mutant names or shell patterns (with --again)")
    args = parser.parse_args(argv)
    if args.mutants and not args.again:
        parser.error("naming mutants needs --again (a fresh run runs them all)")
    if args.pending and not args.mutants:
        parser.error("--pending needs mutant names or patterns (without them, --again runs those not yet run)")
    if not args.again:
        shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(exist_ok=True)
    if lay_out(WORK) and args.again:
        # mutmut records which tests call each function once per test, for the tests it has not
        # seen before: a function added to a source since would be run against the new tests
        # alone, and its mutants would "survive" every older test that reaches it. Without the
        # record, mutmut makes it again from every test (a few minutes); the results are kept.
        (WORK / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    mutants = args.mutants
    if args.pending:
        mutants = [name for name, status in statuses(WORK).items()
                   if status == "not checked" and any(fnmatch.fnmatchcase(name, pattern) for pattern in mutants)]
        if not mutants:
            print("no mutant named is waiting to be run")
            report(statuses(WORK))
            return 0
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *mutants],
                         cwd=WORK)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
        return run.returncode
    print(f"\nmutmut run: {elapsed:.0f} s with {args.jobs} at once\n")
    report(statuses(WORK))
    return 0


if __name__ == "__main__":
    sys.exit(main())
