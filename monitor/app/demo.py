"""``ragmon demo``: the whole loop on simulated multi-tenant traffic with injected incidents.

Runs in one process with no external service. Traffic goes through the real pipeline (decoder,
signals, catalog, metrics); a live view shows the key signals per tenant and index as they move,
and a final report says, for each injected incident, what the monitor found.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import msgspec
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from ragmon.monitor.app.simulate import Incident, Simulator
from ragmon.monitor.core.records import Privilege, RawRecord

MetricReader = Callable[..., float]  # (metric name, **labels) -> sum of matching samples
Snapshot = Callable[[], MetricReader]  # collects the metrics once, for a reader of that moment
AlertLines = Callable[[int], list[str]]  # (traces seen) -> one line per alert fired or resolved since

BATCH = 250


def default_incidents(traces: int) -> list[Incident]:
    """One of each kind, spread over the run so that each shows up on its own."""
    at = lambda fraction: int(traces * fraction)  # noqa: E731
    return [
        Incident("stale_index", "acme", "policies", start=at(0.15)),
        Incident("leak", "globex", "handbook", start=at(0.35), end=at(0.55), rate=0.15),
        Incident("no_answer_spike", "initech", "support-kb", start=at(0.5), end=at(0.7), rate=0.6),
        Incident("reembedding", "acme", "handbook", start=at(0.65)),
    ]


@dataclass
class Finding:
    incident: Incident
    detected: bool
    evidence: str


@dataclass
class DemoReport:
    traces: int
    simulated_hours: float
    findings: list[Finding] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)  # pushed alerts as they fired and resolved

    @property
    def all_detected(self) -> bool:
        return all(f.detected for f in self.findings)


class Demo:
    """Feeds simulator traffic through ``process`` and reads the results back from the metrics."""

    def __init__(self, simulator: Simulator, process, snapshot: Snapshot, console: Console,
                 traces: int, seconds: float, alerts: AlertLines | None = None) -> None:
        self.sim = simulator
        self.process = process
        self.snapshot = snapshot
        self.console = console
        self.traces = traces
        self.seconds = seconds
        self._snapshots: dict[tuple[str, int], tuple[float, float]] = {}
        self._log: list[str] = []
        self._alerts = alerts
        self._alert_log: list[str] = []

    def run(self) -> DemoReport:
        start_time = self.sim.now
        started = time.monotonic()
        with Live(self._view(0), console=self.console, refresh_per_second=4, transient=False) as live:
            self._feed(self.sim.catalog(), 0)
            seen = 0
            batch: list[bytes] = []
            for event in self.sim.traffic(self.traces):
                if event["type"] == "trace" and self.sim.asked > seen:  # a new question, not a rephrase
                    seen = self.sim.asked
                    self._mark(seen)
                batch.append(msgspec.json.encode(event))
                if len(batch) >= BATCH:
                    self._feed(iter(batch), seen)
                    batch = []
                    if self._alerts is not None:
                        fired = self._alerts(seen)
                        self._log.extend(fired)
                        self._alert_log.extend(fired)
                    live.update(self._view(seen))
                    lag = started + self.seconds * seen / self.traces - time.monotonic()
                    if lag > 0:
                        time.sleep(lag)
            self._feed(iter(batch), seen)
            live.update(self._view(seen))
        report = DemoReport(self.traces, (self.sim.now - start_time) / 3600)
        report.findings = [self._finding(incident) for incident in self.sim.incidents]
        report.alerts = list(self._alert_log)
        return report

    def _feed(self, events: Iterator, seen: int) -> None:
        records = [RawRecord("file", e if isinstance(e, bytes) else msgspec.json.encode(e), {"trace": seen},
                             privilege=Privilege.TRUSTED)
                   for e in events]
        if records:
            self.process(records)

    def _mark(self, n: int) -> None:
        for incident in self.sim.incidents:
            for edge in (incident.start, incident.end):
                if edge == n:
                    self._snapshots[(incident.kind, edge)] = self._answers(incident)
            if incident.start == n:
                self._log.append(f"trace {n}: [bold red]{incident.kind}[/] injected into "
                                 f"{incident.tenant}/{incident.index}")

    def _answers(self, incident: Incident) -> tuple[float, float]:
        labels = {"tenant": incident.tenant, "index": incident.index}
        read = self.snapshot()
        return read("ragmon_answers_total", **labels), read("ragmon_answers_total", outcome="abstained", **labels)

    def _view(self, seen: int) -> Group:
        read = self.snapshot()
        table = Table(title=f"ragmon demo — {seen}/{self.traces} questions, simulated "
                            f"{time.strftime('%a %H:%M', time.gmtime(self.sim.now))} UTC")
        for column in ("tenant", "index", "traces", "abstained", "low-score lists", "leaks (context)",
                       "stale served", "mixed embeddings", "rephrases"):
            table.add_column(column, justify="left" if column in ("tenant", "index") else "right")
        for tenant in self.sim.tenants:
            for index in sorted({i for (t, i) in self.sim.documents if t == tenant}):
                labels = {"tenant": tenant, "index": index}
                total = read("ragmon_answers_total", **labels)
                abstained = read("ragmon_answers_total", outcome="abstained", **labels)
                leaks = read("ragmon_permission_violations_total", stage="context", **labels)
                table.add_row(
                    tenant, index, f"{total:.0f}", f"{100 * abstained / total:.1f}%" if total else "-",
                    f"{read('ragmon_low_score_retrievals_total', **labels):.0f}",
                    f"[bold red]{leaks:.0f}[/]" if leaks else "0",
                    f"{read('ragmon_stale_passages_served_total', stage='context', **labels):.0f}",
                    f"{read('ragmon_mixed_embedding_results_total', **labels):.0f}",
                    f"{read('ragmon_rephrases_total', **labels):.0f}",
                )
        health = Table(title="indexes")
        for column in ("index", "stale documents", "max staleness", "embedding models"):
            health.add_column(column, justify="left" if column == "index" else "right")
        for index in sorted({i for (_, i) in self.sim.documents}):
            stale = read("ragmon_index_stale_documents", index=index)
            hours = read("ragmon_index_max_staleness_seconds", index=index) / 3600
            models = read("ragmon_index_embedding_models", index=index)
            health.add_row(index, f"{stale:.0f}", f"{hours:.1f} h",
                           f"[bold red]{models:.0f}[/]" if models > 1 else f"{models:.0f}")
        return Group(table, health, *self._log[-6:])

    def _finding(self, incident: Incident) -> Finding:
        labels = {"tenant": incident.tenant, "index": incident.index}
        read = self.snapshot()
        injected = self.sim.injected
        if incident.kind == "leak":
            expected = injected[("leak_context", incident.tenant, incident.index)]
            found = read("ragmon_permission_violations_total", stage="context", **labels)
            return Finding(incident, expected > 0 and found == expected,
                           f"{found:.0f} context-stage violations counted, {expected} injected")
        if incident.kind == "stale_index":
            expected = injected[("stale_docs", incident.tenant, incident.index)]
            stale = read("ragmon_index_stale_documents", index=incident.index)
            hours = read("ragmon_index_max_staleness_seconds", index=incident.index) / 3600
            served = read("ragmon_stale_passages_served_total", stage="context", **labels)
            return Finding(incident, stale >= expected > 0 and served > 0,
                           f"{stale:.0f} stale documents ({expected} changed), oldest change {hours:.1f} h "
                           f"unindexed, {served:.0f} stale passages reached the model")
        if incident.kind == "no_answer_spike":
            before_total, before_abstained = self._snapshots.get((incident.kind, incident.start), (0, 0))
            after_total, after_abstained = self._snapshots.get((incident.kind, incident.end), self._answers(incident))
            baseline = before_abstained / before_total if before_total else 0.0
            during_total = after_total - before_total
            during = (after_abstained - before_abstained) / during_total if during_total else 0.0
            return Finding(incident, during > 2 * baseline and during > 0.3,
                           f"abstention rate {100 * during:.0f}% during the spike, {100 * baseline:.0f}% before")
        models = read("ragmon_index_embedding_models", index=incident.index)
        mixed = read("ragmon_mixed_embedding_results_total", **labels)
        return Finding(incident, models > 1 and mixed > 0,
                       f"index holds {models:.0f} embedding models; {mixed:.0f} answers mixed them in one context")


def print_report(console: Console, report: DemoReport) -> None:
    console.print()
    table = Table(title=f"what ragmon found in {report.traces} traces ({report.simulated_hours:.0f} simulated hours)")
    for column in ("incident", "where", "found", "evidence"):
        table.add_column(column)
    for finding in report.findings:
        incident = finding.incident
        table.add_row(incident.kind, f"{incident.tenant}/{incident.index}",
                      "[green]yes[/]" if finding.detected else "[red]NO[/]", finding.evidence)
    console.print(table)
    if report.alerts:
        console.print("alerts pushed during the run:")
        for line in report.alerts:
            console.print(f"  {line}")
