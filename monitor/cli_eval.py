"""``ragmon eval``: score a run against the labeled cases and gate CI on the result."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from monitor.evaluate import METRICS, evaluate, gate, load_cases, load_runs, parse_threshold

console = Console()


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected comma-separated integers, e.g. 3,5,10") from None
    if not ks or ks[0] < 1:
        raise click.BadParameter("every k must be at least 1")
    return ks


@click.command("eval")
@click.option("--cases", "cases_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Labeled cases (JSONL).")
@click.option("--run", "run_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="What the system retrieved per case (JSONL), in rank order.")
@click.option("--k", "k_text", default="3,5,10", show_default=True, help="Cut-offs, comma-separated.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for --baseline later).")
@click.option("--fail-under", "floors", multiple=True, metavar="METRIC@K=VALUE",
              help="Exit 1 when an overall metric is under VALUE, e.g. recall@5=0.8. Repeatable.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A previous --json report to compare with.")
@click.option("--max-drop", type=float, help="Exit 1 when an overall metric fell more than this from the baseline.")
def eval_command(cases_file: Path, run_file: Path, k_text: str, as_json: bool, floors: tuple[str, ...],
                 baseline: Path | None, max_drop: float | None) -> None:
    """Recall, precision, hit, MRR and nDCG at k over the answerable cases; abstention on the
    unanswerable ones; claim evidence availability; per split and per tag."""
    ks = _ks(k_text)
    try:
        thresholds = [parse_threshold(text) for text in floors]
        cases = load_cases(cases_file.read_bytes())
        runs = load_runs(run_file.read_bytes())
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if (baseline is None) != (max_drop is None):
        raise click.UsageError("--baseline and --max-drop go together")
    report = evaluate(cases, runs, ks)
    previous = json.loads(baseline.read_text()) if baseline is not None else None
    failures = gate(report, thresholds, previous, max_drop)
    report["failures"] = failures
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print(report, ks)
    for failure in failures:
        click.echo(f"FAIL {failure}", err=True)
    if failures:
        raise SystemExit(1)


def _print(report: dict, ks: list[int]) -> None:
    groups = report["groups"]
    for k in ks:
        table = Table(title=f"at k={k} (means over answerable cases)")
        for column in ("group", "cases", *METRICS):
            table.add_column(column, justify="left" if column == "group" else "right")
        for name, group in groups.items():
            table.add_row(name, str(group["answerable"]), *(_fmt(group["metrics"][f"{m}@{k}"]) for m in METRICS))
        console.print(table)
    abstention = Table(title="unanswerable cases and abstention")
    for column in ("group", "unanswerable", "correct abstentions", "false abstentions", "no run"):
        abstention.add_column(column, justify="left" if column == "group" else "right")
    for name, group in groups.items():
        abstention.add_row(name, str(group["unanswerable"]), _fmt(group["correct_abstention_rate"]),
                           _fmt(group["false_abstention_rate"]), str(group["missing_runs"]))
    console.print(abstention)
    overall = groups.get("all", {})
    claims = ", ".join(f"@{k} {_fmt(overall.get(f'claim_evidence@{k}'))}" for k in ks)
    console.print(f"claim evidence available: {claims}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
