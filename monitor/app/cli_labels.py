"""``ragmon labels``: labeled work back from Label Studio (or a filled JSONL) into the regression set,
and the set's questions out for a candidate system."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from ragmon.exporters.label_studio import LabelStudioError
from ragmon.monitor.app.cli_context import label_studio_of, settings_of, store_of
from ragmon.monitor.app.cli_output import shown, stdout, visible
from ragmon.monitor.core.private_files import write_private
from ragmon.monitor.labeling.labels import append_cases, read_labeled
from ragmon.monitor.labeling.questions import questions

console = stdout()  # full-width lines when stdout is not a terminal


@click.group()
def labels() -> None:
    """Labeled cases: fetch them from Label Studio, import them into the regression set."""


@labels.command("pull")
@click.option("--project", help="Label Studio project title (default: label_studio.project).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Where the export goes (default: ragmon-data/labels/PROJECT.json).")
@click.pass_context
def pull(ctx: click.Context, project: str | None, out_file: Path | None) -> None:
    """Fetch the project's export (every task with its annotations) as Label Studio JSON, ready
    for ``ragmon labels import``."""
    settings = settings_of(ctx)
    title = project or settings.label_studio.project
    try:
        with label_studio_of(settings) as studio:
            found = studio.find_project(title)
            if found is None:
                raise click.ClickException(f"Label Studio has no project titled {title!r}")
            tasks = studio.export(found["id"])
    except LabelStudioError as error:
        raise click.ClickException(str(error)) from None
    out_file = out_file or Path("ragmon-data") / "labels" / f"{re.sub(r'[^A-Za-z0-9._-]+', '-', title)}.json"
    write_private(out_file, (json.dumps(tasks, indent=1, sort_keys=True) + "\n").encode())  # labeled cases: 0600
    annotated = sum(1 for t in tasks if any(not a.get("was_cancelled") for a in t.get("annotations") or []))
    console.print(shown(f"{len(tasks)} tasks from project {title!r} in {out_file}: {annotated} annotated, "
                        f"{len(tasks) - annotated} not yet"))


@labels.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dataset", type=click.Path(dir_okay=False, path_type=Path),
              help="The regression set to append to (default: regression.cases).")
@click.option("--dry-run", is_flag=True, help="Check and report only; change nothing.")
@click.pass_context
def import_labels(ctx: click.Context, file: Path, dataset: Path | None, dry_run: bool) -> None:
    """Check labeled work (a Label Studio JSON export, or a filled cases JSONL) and append the good
    cases to the regression set: stable order, each case once. Their samples become labeled.
    Problems are reported by task, and make the exit status 1."""
    settings = settings_of(ctx)
    dataset = dataset or settings.regression.cases
    reviewed = read_labeled(file.read_bytes())
    for problem in reviewed.problems:
        click.echo(visible(f"problem: {problem.where}: {problem.message}"), err=True)
    if dry_run:
        console.print(shown(f"dry run: {len(reviewed.cases)} cases would be imported, {reviewed.unlabeled} not "
                            "labeled yet"))
    else:
        added, present = append_cases(dataset, reviewed.cases)
        labeled = store_of(settings).mark_labeled([c["id"] for c in reviewed.cases])
        console.print(shown(f"{len(added)} cases added to {dataset}, {len(present)} were there already; "
                            f"{reviewed.unlabeled} tasks not labeled yet; {labeled} samples marked labeled"))
    if reviewed.problems:
        click.echo(f"{len(reviewed.problems)} tasks with problems were not imported", err=True)
        raise SystemExit(1)


@labels.command("questions")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The regression set (default: regression.cases).")
@click.option("--split", "splits", multiple=True, help="Only the cases of this split. Repeatable.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where the questions go (JSONL).")
@click.pass_context
def questions_command(ctx: click.Context, dataset: Path | None, splits: tuple[str, ...], out_file: Path) -> None:
    """The questions to ask a candidate system, one JSON line per case: its id, question, the
    earlier turns of its conversation (messages and answers), turn, tenant, caller groups and
    corpus, without its labels. Replay each with its history and write a run for ``ragmon eval``."""
    dataset = dataset or settings_of(ctx).regression.cases
    if not dataset.exists():
        raise click.ClickException(f"no regression set at {dataset}")
    lines = []
    for number, raw in enumerate(dataset.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            case = json.loads(raw)
            if not isinstance(case, dict) or not isinstance(case.get("id"), str):
                raise ValueError("not a case (no `id`)")
            lines.extend(questions([case], splits))
        except ValueError as error:
            raise click.ClickException(f"{dataset} line {number}: {error}") from None
    write_private(out_file, "".join(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n"
                                    for line in lines).encode())  # redacted questions: the owner's alone
    follow_ups = sum(1 for line in lines if line["history"])
    console.print(shown(f"{len(lines)} questions in {out_file}, {follow_ups} with the turns before them"))
