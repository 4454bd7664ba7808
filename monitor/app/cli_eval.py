"""``ragmon eval``: score a run against the labeled cases and gate CI on the result."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from ragmon.monitor.app.cli_numbers import FINITE_FLOAT
from ragmon.monitor.app.cli_output import output_option, shown, stdout, visible
from ragmon.monitor.labeling.evaluate import METRICS, evaluate, gate, load_cases, load_runs, parse_threshold
from ragmon.monitor.labeling.replay_check import mismatch_failures, mismatch_notes, mismatches

console = stdout()  # full-width lines when stdout is not a terminal


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
@click.option("--run", "run_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="What the system retrieved per case (JSONL), in rank order.")
@click.option("--run-from-store", is_flag=True,
              help="Instead of --run: what production retrieved, from the stored trace each case was sampled from.")
@click.option("--stage", default="context", show_default=True,
              help="With --run-from-store: `context` (what reached the model) or a retriever's name.")
@click.option("--write-run", type=click.Path(dir_okay=False, path_type=Path),
              help="With --run-from-store: also write the run built as JSONL.")
@click.option("--k", "k_text", default="3,5,10", show_default=True, help="Cut-offs, comma-separated.")
@output_option("table", "json")
@click.option("--fail-under", "floors", multiple=True, metavar="[GROUP/]METRIC@K=VALUE",
              help="Exit 1 when an overall metric (or one group's) is under VALUE, e.g. recall@5=0.8 or "
                   "turn:follow-up/recall@5=0.6. Repeatable.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A previous `-o json` report to compare with.")
@click.option("--max-drop", type=FINITE_FLOAT,
              help="Exit 1 when an overall metric fell more than this from the baseline.")
@click.pass_context
def eval_command(ctx: click.Context, cases_file: Path, run_file: Path | None, run_from_store: bool, stage: str,
                 write_run: Path | None, k_text: str, output: str, floors: tuple[str, ...], baseline: Path | None,
                 max_drop: float | None) -> None:
    """Recall, precision, hit, MRR and nDCG at k over the answerable cases; abstention on the
    unanswerable ones; claim evidence availability; per split, per tag, and first turns apart
    from follow-ups. A run that replayed a follow-up without its case's history fails."""
    ks = _ks(k_text)
    if (run_file is None) == (not run_from_store):
        raise click.UsageError("give either --run FILE or --run-from-store")
    if (baseline is None) != (max_drop is None):
        raise click.UsageError("--baseline and --max-drop go together")
    try:
        thresholds = [parse_threshold(text) for text in floors]
        cases = load_cases(cases_file.read_bytes())
        runs = load_runs(run_file.read_bytes()) if run_file is not None else _production(ctx, cases, stage, write_run)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    report = evaluate(cases, runs, ks)
    found = mismatches(cases, runs)
    previous = json.loads(baseline.read_text()) if baseline is not None else None
    try:
        failures = mismatch_failures(found) + gate(report, thresholds, previous, max_drop)
    except ValueError as error:
        raise click.UsageError(f"--baseline {baseline}: {error}") from None
    report["mismatches"] = found
    report["failures"] = failures
    if output == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        _print(report, ks)
    for note in mismatch_notes(found):
        click.echo(visible(f"warning: {note}"), err=True)
    for failure in failures:
        click.echo(visible(f"FAIL {failure}"), err=True)
    if failures:
        raise SystemExit(1)


def _production(ctx: click.Context, cases, stage: str, write_run: Path | None):
    import msgspec

    from ragmon.monitor.app.cli_context import settings_of, store_of
    from ragmon.monitor.core.signals.outcome import compile_refusals
    from ragmon.monitor.labeling.production_runs import origin_of, production_run

    settings = settings_of(ctx)
    payloads = store_of(settings).payloads([origin_of(c) for c in cases])
    runs, missing = production_run(cases, payloads, stage, compile_refusals(settings.signals.refusal_patterns))
    if missing:
        click.echo(visible(f"{len(missing)} cases have no stored trace (scored as retrieving nothing), "
                           f"e.g. {', '.join(missing[:3])}"), err=True)
    if write_run is not None:
        write_run.write_bytes(b"".join(msgspec.json.encode(run) + b"\n" for run in runs))
    return runs


def _print(report: dict, ks: list[int]) -> None:
    groups = report["groups"]
    for k in ks:
        table = Table(title=f"at k={k} (means over answerable cases)")
        for column in ("group", "cases", *METRICS):
            table.add_column(column, justify="left" if column == "group" else "right")
        for name, group in groups.items():
            table.add_row(shown(name), str(group["answerable"]), *(_fmt(group["metrics"][f"{m}@{k}"]) for m in METRICS))
        console.print(table)
    abstention = Table(title="unanswerable cases and abstention")
    for column in ("group", "unanswerable", "correct abstentions", "false abstentions", "no run"):
        abstention.add_column(column, justify="left" if column == "group" else "right")
    for name, group in groups.items():
        abstention.add_row(shown(name), str(group["unanswerable"]), _fmt(group["correct_abstention_rate"]),
                           _fmt(group["false_abstention_rate"]), str(group["missing_runs"]))
    console.print(abstention)
    overall = groups.get("all", {})
    claims = ", ".join(f"@{k} {_fmt(overall.get(f'claim_evidence@{k}'))}" for k in ks)
    console.print(f"claim evidence available: {claims}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
