"""The sampler end to end in the pipeline: strata stored, replays harmless, late strata joined,
redaction before storage, metrics counted once."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import msgspec
from prometheus_client import CollectorRegistry

from ragmon.exporters.prometheus import metric_sum
from ragmon.monitor.app.simulate import Incident, Simulator
from ragmon.monitor.app.wiring import build_runtime
from ragmon.monitor.config.settings import load_settings
from ragmon.monitor.core.records import Privilege, RawRecord
from ragmon.monitor.labeling.quota import rank_of
from ragmon.monitor.labeling.sample_store import NewSample, SampleStore
from ragmon.monitor.labeling.sampler import SampleWriter, SamplingDecision
from ragmon.monitor.labeling.sampling import decide
from ragmon.monitor.labeling.weeks import iso_week
from ragmon.monitor.storage.store import make_engine


def runtime_for(tmp_path, **env):
    environ = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}",
               "RAGMON_DEAD_LETTER__PATH": str(tmp_path / "dead.jsonl"),
               "RAGMON_SAMPLING__WEEKLY_CAP": "100000", **env}
    return build_runtime(load_settings(environ=environ), registry=CollectorRegistry())


def feed(runtime, events) -> None:
    records = [RawRecord("file", msgspec.json.encode(e), privilege=Privilege.TRUSTED) for e in events]
    for start in range(0, len(records), 500):
        runtime.pipeline.process(records[start:start + 500])


def traffic(seed: int = 11, traces: int = 4000):
    simulator = Simulator(seed=seed, start=time.time() - 3 * 86400, rate=2.0, incidents=[
        Incident("leak", "globex", "handbook", start=500, end=3500, rate=0.3)])
    return [*simulator.catalog(), *simulator.traffic(traces)], simulator


def test_every_leak_is_sampled_and_a_replay_stores_nothing_twice(tmp_path):
    events, simulator = traffic()
    runtime = runtime_for(tmp_path)
    feed(runtime, events)
    store = SampleStore(runtime.engine)
    first = {s.trace_id: s for s in store.find()}
    leaks = simulator.injected[("leak_context", "globex", "handbook")]
    leaked = [s for s in first.values() if "permission_violation" in s.strata]
    assert len(leaked) == leaks > 50
    assert all(s.tenant == "globex" for s in leaked)
    strata = Counter(stratum for s in first.values() for stratum in s.strata)
    assert strata["random"] > 0 and strata["abstained"] > 0 and strata["low_score"] > 0
    def held() -> float:  # places taken minus places given up to a lower-ranked trace
        return (metric_sum(runtime.registry, "ragmon_samples_total")
                - metric_sum(runtime.registry, "ragmon_samples_dropped_total", reason="displaced"))

    assert held() == sum(strata.values())
    feed(runtime, events)  # the same traffic again
    again = store.find()
    assert len(again) == len({s.trace_id for s in again})  # one row per trace
    by_id = {s.trace_id: s for s in again}
    # the leaks exactly as before; a replay may add samples (the low-score baselines learned from the
    # first pass), which may take the places of higher-ranked ones: the counters account for each
    assert sorted(t for t, s in by_id.items() if "permission_violation" in s.strata) == sorted(s.trace_id
                                                                                             for s in leaked)
    assert held() == sum(len(s.strata) for s in again)  # repeats not counted
    assert store.counts_by_status() == {"queued": len(again)}
    runtime.close()


def test_negative_feedback_samples_the_earlier_trace(tmp_path):
    runtime = runtime_for(tmp_path)
    now = time.time()
    trace = {"type": "trace", "trace_id": "t-neg", "time": now - 60, "tenant": "acme", "query": "Where is the form?",
             "index": {"name": "policies"}, "caller": {"id": "u-1", "groups": ["staff"]},
             "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}
    feed(runtime, [trace, {"type": "feedback", "trace_id": "t-neg", "kind": "thumb", "value": "down"}])
    [sample] = [s for s in SampleStore(runtime.engine).find() if s.trace_id == "t-neg"]
    assert "negative_feedback" in sample.strata
    runtime.close()


def test_late_feedback_reaches_the_last_late_window_traces_and_drops_older_ones_as_evicted(tmp_path):
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__LATE_WINDOW_TRACES="2", RAGMON_SAMPLING__RATES__RANDOM="0")
    ids = ["t-oldest", "t-middle", "t-newest"]
    feed(runtime, [{"type": "trace", "trace_id": trace_id, "time": time.time() - 60, "tenant": "acme",
                    "query": f"Question {n}?", "index": {"name": "policies"},
                    "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}
                   for n, trace_id in enumerate(ids)])
    feed(runtime, [{"type": "feedback", "trace_id": trace_id, "kind": "thumb", "value": "down"} for trace_id in ids])
    samples = SampleStore(runtime.engine).find()
    assert sorted(s.trace_id for s in samples) == ["t-middle", "t-newest"]
    assert all(s.strata == ["negative_feedback"] for s in samples)
    assert metric_sum(runtime.registry, "ragmon_samples_dropped_total", reason="trace_evicted") == 1
    runtime.close()


def test_late_feedback_samples_each_trace_by_its_own_draw(tmp_path):
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__NEGATIVE_FEEDBACK="0.5", RAGMON_SAMPLING__RATES__RANDOM="0")
    ids = [f"t-{n}" for n in range(10)]
    drawn = sorted(t for t in ids if decide(runtime.settings.sampling, t, ["negative_feedback"]))
    assert 0 < len(drawn) < len(ids)  # the draw picks some traces, not all or none
    feed(runtime, [{"type": "trace", "trace_id": trace_id, "time": time.time() - 60, "tenant": "acme",
                    "query": f"Question {n}?", "index": {"name": "policies"},
                    "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}
                   for n, trace_id in enumerate(ids)])
    feed(runtime, [{"type": "feedback", "trace_id": trace_id, "kind": "thumb", "value": "down"} for trace_id in ids])
    assert sorted(s.trace_id for s in SampleStore(runtime.engine).find()) == drawn
    runtime.close()


def test_a_trace_another_replica_processed_is_sampled_on_its_late_feedback(tmp_path):
    runtime = runtime_for(tmp_path)
    trace = {"type": "trace", "trace_id": "t-warm", "time": time.time() - 60, "tenant": "acme", "query": "Where?",
             "index": {"name": "policies"}, "caller": {"id": "u-1", "groups": ["staff"]},
             "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}
    replayed = [RawRecord("kafka", msgspec.json.encode(trace), privilege=Privilege.TRUSTED)]
    assert runtime.pipeline.warm(replayed) == 1  # a partition just assigned: its owner decided the trace
    assert SampleStore(runtime.engine).find() == []
    feed(runtime, [{"type": "feedback", "trace_id": "t-warm", "kind": "thumb", "value": "down"}])
    [sample] = SampleStore(runtime.engine).find()
    assert sample.trace_id == "t-warm" and sample.strata == ["negative_feedback"]
    assert sample.payload["query"] == "Where?"
    runtime.close()


def test_each_sample_the_store_creates_is_published_once_with_its_redacted_trace(tmp_path):
    runtime = runtime_for(tmp_path)
    published: list[dict] = []
    writer = SampleWriter(SampleStore(runtime.engine), runtime.settings.sampling, publish=published.extend)
    redacted = {"trace_id": "t1", "query": "mail me at [EMAIL]"}
    sample = NewSample("t1", "acme", "2026-W49", {"random", "low_score"}, "heldout", "fp", 0.0, lambda: redacted)
    decided = SimpleNamespace(sampling=SamplingDecision(samples=[sample]))
    writer.consume(decided)
    assert writer.flush(1.0)
    assert published == [{"trace_id": "t1", "tenant": "acme", "week": "2026-W49",
                          "strata": ["low_score", "random"], "split": "heldout", "trace": redacted}]
    later = NewSample("t2", "acme", "2026-W49", {"random"}, "dev", "fp2", 0.0, {"trace_id": "t2"})
    writer.consume(decided)  # a replay: already stored, not new
    writer.consume(SimpleNamespace(sampling=SamplingDecision(samples=[later])))
    assert writer.flush(1.0)
    assert [p["trace_id"] for p in published] == ["t1", "t2"]
    runtime.close()


def test_last_weeks_traces_are_sampled_and_older_ones_dropped_as_old_week_once_per_stratum(tmp_path):
    # a newer week seen first makes the week three weeks back too old; the rephrase of an old trace
    # is dropped for its own stratum and for the stratum it gives the earlier trace, in one decision
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0", RAGMON_SAMPLING__RATES__REPHRASED="1.0")
    now, old = time.time() - 60, time.time() - 21 * 86400

    def trace(trace_id, at, query):
        return {"type": "trace", "trace_id": trace_id, "time": at, "tenant": "acme", "query": query,
                "index": {"name": "policies"}, "caller": {"id": "u-1", "groups": ["staff"]},
                "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}

    feed(runtime, [trace("t-now", now, "Who signs the travel request?"),
                   trace("t-last-week", now - 7 * 86400, "How many days of leave are left?"),
                   trace("t-old", old, "Where is the leave form?"),
                   trace("t-old-again", old + 30, "Where is the leave form exactly?")])
    assert sorted(s.trace_id for s in SampleStore(runtime.engine).find()) == ["t-last-week", "t-now"]
    # t-old: random; t-old-again: random, and rephrased for t-old
    assert metric_sum(runtime.registry, "ragmon_samples_dropped_total", reason="old_week") == 3
    runtime.close()


def test_a_full_stratum_keeps_the_lowest_ranked_trace_whichever_arrived_first(tmp_path):
    def trace(trace_id, query):
        return {"type": "trace", "trace_id": trace_id, "time": time.time() - 60, "tenant": "acme", "query": query,
                "index": {"name": "policies"}, "answer": {"text": "In the portal.", "citations": []},
                "context": [{"id": "p1"}]}

    traces = [trace("t-first", "Where is the leave form?"), trace("t-second", "Who signs the travel request?")]
    lowest = min(("t-first", "t-second"), key=lambda trace_id: rank_of("ragmon", trace_id))
    for order in (traces, traces[::-1]):
        runtime = runtime_for(tmp_path / order[0]["trace_id"], RAGMON_SAMPLING__RATES__RANDOM="1.0",
                              RAGMON_SAMPLING__WEEKLY_CAP_OVERRIDES__RANDOM="1")
        for event in order:  # one batch each: the second offer meets a full stratum
            feed(runtime, [event])
        assert [s.trace_id for s in SampleStore(runtime.engine).find()] == [lowest]
        runtime.close()


def test_the_weekly_total_cap_bounds_the_samples_the_pipeline_stores(tmp_path):
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0", RAGMON_SAMPLING__WEEKLY_TOTAL_CAP="1")
    feed(runtime, [{"type": "trace", "trace_id": f"t-{n}", "time": time.time() - 60, "tenant": f"tenant-{n}",
                    "query": f"Question {n}?", "index": {"name": "policies"},
                    "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}
                   for n in range(3)])
    assert len(SampleStore(runtime.engine).find()) == 1
    runtime.close()


def test_events_that_sample_nothing_are_no_error_of_the_samples_sink(tmp_path):
    # the catalog's events and a trace no stratum draws carry no sampling decision: the samples
    # sink passes over them (a failing sink is counted, logged and alerted on: RagmonSinkErrors)
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="0")
    simulator = Simulator(seed=5, start=time.time() - 3600, rate=2.0)
    feed(runtime, [*list(simulator.catalog())[:3],
                   {"type": "trace", "trace_id": "t-quiet", "time": time.time() - 60, "tenant": "acme",
                    "query": "Where is the leave form?", "index": {"name": "policies"},
                    "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}])
    assert metric_sum(runtime.registry, "ragmon_events_total") == 4
    assert SampleStore(runtime.engine).find() == []
    assert metric_sum(runtime.registry, "ragmon_sink_errors_total") == 0
    runtime.close()


def test_a_samples_week_starts_on_monday_in_the_configured_time_zone(tmp_path):
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0",
                          RAGMON_SAMPLING__TIME_ZONE="Pacific/Auckland")
    # a Sunday 20:00 UTC, a week or two back, is Monday 08:00 or 09:00 in Auckland (UTC+12 or +13)
    today = datetime.now(UTC).replace(hour=20, minute=0, second=0, microsecond=0)
    sunday = today - timedelta(days=today.isoweekday() % 7 + 7)
    sunday_evening = sunday.timestamp()
    feed(runtime, [{"type": "trace", "trace_id": "t-monday", "time": sunday_evening, "tenant": "acme",
                    "query": "Where is the leave form?", "index": {"name": "policies"},
                    "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}])
    [sample] = SampleStore(runtime.engine).find()
    assert sample.week == iso_week(sunday_evening + 86400)  # in UTC, the week before
    runtime.close()


def test_personal_data_is_gone_before_the_sample_is_stored(tmp_path):
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0")
    trace = {"type": "trace", "trace_id": "t-pii", "time": time.time() - 60, "tenant": "acme",
             "query": "My card 4111 1111 1111 1111 was charged, mail me at jane.doe@example.com",
             "index": {"name": "policies"}, "caller": {"id": "jane.doe", "groups": ["staff"]},
             "context": [{"id": "p1", "text": "Call +1 415 555 0132 for refunds."}],
             "answer": {"text": "We emailed jane.doe@example.com.", "citations": ["p1"]}}
    feed(runtime, [trace])
    [sample] = SampleStore(runtime.engine).find()
    stored = msgspec.json.encode(sample.payload).decode()
    for secret in ("4111 1111 1111 1111", "jane.doe@example.com", "555 0132", "jane.doe"):
        assert secret not in stored
    assert sample.payload["caller"]["groups"] == ["staff"]
    assert sample.payload["caller"]["id"].startswith("caller:")
    assert "[CARD]" in sample.payload["query"] and "[EMAIL]" in sample.payload["query"]
    runtime.close()


def test_trace_ids_that_redact_alike_are_two_samples_keyed_by_their_shown_ids(tmp_path):
    """Two trace ids whose redacted text is the same (``[EMAIL]``) are two traces: each is
    stored under its shown id, and late feedback on one reaches its own sample."""
    from ragmon.monitor.labeling.redact import RedactionConfig, Redactor

    key = "sampler-shown-ids-key-0123"
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0", RAGMON_REDACTION__CALLER_KEY=key)
    shown = Redactor(RedactionConfig(caller_key=key)).shown_id
    now = time.time()
    ids = ["collide-alice@example.com", "collide-bob@example.org"]
    traces = [{"type": "trace", "trace_id": trace_id, "time": now - 60, "tenant": "ops@example.com",
               "query": question, "index": {"name": "policies"}, "context": [{"id": "p1"}]}
              for trace_id, question in zip(ids, ["Where is the form?", "Who signs the travel request?"], strict=True)]
    feed(runtime, [*traces, {"type": "feedback", "trace_id": ids[1], "kind": "thumb", "value": "down"}])
    samples = {s.trace_id: s for s in SampleStore(runtime.engine).find()}
    runtime.close()
    assert sorted(samples) == sorted(shown(i) for i in ids) and all(k.startswith("[EMAIL]~k") for k in samples)
    assert {s.tenant for s in samples.values()} == {shown("ops@example.com")}
    assert samples[shown(ids[0])].strata == ["random"]
    assert sorted(samples[shown(ids[1])].strata) == ["negative_feedback", "random"]
    for trace_id, sample in samples.items():
        assert sample.payload["trace_id"] == trace_id and sample.payload["tenant"] == sample.tenant


def test_the_samples_commands_take_a_private_tenant_by_its_raw_name_and_keep_its_batch_inside(tmp_path, monkeypatch):
    """A tenant is stored by its shown id: ``--tenant`` given the raw name (or the shown id) finds
    its samples, and the default batch directory is made of the tenant's safe characters only."""
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main
    from ragmon.monitor.labeling.weeks import iso_week

    key = "samples-tenant-key-0123456"
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0", RAGMON_REDACTION__CALLER_KEY=key)
    now = time.time()
    feed(runtime, [{"type": "trace", "trace_id": f"t-{tenant}-{i}", "time": now - 60, "tenant": tenant,
                    "query": f"question {i} of {tenant}", "index": {"name": "policies"}, "context": [{"id": "p1"}]}
                   for tenant in ("ops@example.com", "../../escape") for i in range(3)])
    stored = {s.tenant for s in SampleStore(runtime.engine).find()}
    runtime.close()
    assert "ops@example.com" not in stored and len(stored) == 2
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}", "RAGMON_REDACTION__CALLER_KEY": key}
    for given in ("ops@example.com", next(t for t in stored if t.startswith("[EMAIL]"))):
        listed = CliRunner().invoke(main, ["samples", "list", "-o", "json", "--tenant", given], env=env)
        assert listed.exit_code == 0, listed.output
        assert len(listed.output.splitlines()) == 3, given
    monkeypatch.chdir(tmp_path)
    week = iso_week(now - 60)
    pulled = CliRunner().invoke(main, ["samples", "pull", "--week", week, "--tenant", "../../escape"], env=env)
    assert pulled.exit_code == 0, pulled.output
    assert (tmp_path / "ragmon-data" / "batches" / f"{week}-.._.._escape" / "cases.jsonl").exists()
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape").exists()


def test_samples_list_and_stats_commands(tmp_path):
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main

    events, _ = traffic(traces=1500)
    runtime = runtime_for(tmp_path)
    feed(runtime, events)
    stored = SampleStore(runtime.engine).find()
    runtime.close()
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
    listed = CliRunner().invoke(main, ["samples", "list", "-o", "json", "--limit", "1000"], env=env)
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert sorted(r["trace_id"] for r in rows) == sorted(s.trace_id for s in stored)
    globex = CliRunner().invoke(main, ["samples", "list", "-o", "json", "--tenant", "globex", "--limit", "1000"],
                                env=env)
    assert {json.loads(line)["tenant"] for line in globex.output.splitlines()} == {"globex"}
    stats = CliRunner().invoke(main, ["samples", "stats", "-o", "json"], env=env)
    report = json.loads(stats.output)
    assert report["statuses"] == {"queued": len(stored)}
    assert sum(r["samples"] for r in report["strata"]) == sum(len(s.strata) for s in stored)
    table = CliRunner().invoke(main, ["samples", "stats"], env=env)
    assert "by status: queued" in table.output


def test_the_weekly_pull_writes_the_same_batch_twice_and_only_the_tenants(tmp_path):
    from click.testing import CliRunner

    from ragmon.monitor.app.cli import main

    events, _ = traffic(traces=2000)
    pii = {"type": "trace", "trace_id": "t-pii", "time": time.time() - 3600, "tenant": "globex",
           "query": "Refund to DE89 3704 0044 0532 0130 00 please",
           "index": {"name": "handbook"}, "caller": {"id": "alice@example.com", "groups": ["staff"]},
           "context": [{"id": "p1", "text": "Write to alice@example.com"}],
           "answer": {"text": "Done.", "citations": []}}
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0")
    feed(runtime, [*events, pii])
    store = SampleStore(runtime.engine)
    week = next(s.week for s in store.find() if s.trace_id == "t-pii")
    globex = [s for s in store.find(week=week) if s.tenant == "globex"]
    runtime.close()
    env = {"RAGMON_DATABASE__URL": f"sqlite:///{tmp_path / 'ragmon.db'}"}
    out = tmp_path / "batch"
    first = CliRunner().invoke(main, ["samples", "pull", "--week", week, "--tenant", "globex", "--out", str(out)],
                               env=env)
    assert first.exit_code == 0, first.output
    files = {name: (out / name).read_bytes() for name in ("cases.jsonl", "tasks.json", "label-config.xml")}
    cases = [json.loads(line) for line in files["cases.jsonl"].splitlines()]
    assert sorted(c["id"] for c in cases) == sorted(s.trace_id for s in globex)
    assert {c["tenant"] for c in cases} == {"globex"}
    case = next(c for c in cases if c["id"] == "t-pii")
    assert case["expected"] is None and case["relevant"] == [] and case["origin"] == {"trace_id": "t-pii",
                                                                                     "week": week}
    assert case["candidates"][0]["id"] == "p1" and case["caller_groups"] == ["staff"]
    everything = b"".join(files.values())
    assert b"alice@example.com" not in everything and b"DE89 3704" not in everything
    tasks = json.loads(files["tasks.json"])
    assert len(tasks) == len(cases) and tasks[0]["data"]["passages"][0]["idx"] == 0
    assert SampleStore(make_engine(env["RAGMON_DATABASE__URL"])).counts_by_status()["exported"] == len(cases)
    again = CliRunner().invoke(main, ["samples", "pull", "--week", week, "--tenant", "globex", "--out", str(out)],
                               env=env)
    assert again.exit_code == 0 and "(0 newly exported)" in " ".join(again.output.split())
    assert {name: (out / name).read_bytes() for name in files} == files  # the same batch
    bad = CliRunner().invoke(main, ["samples", "pull", "--week", "2026-48"], env=env)
    assert bad.exit_code == 2 and "ISO week" in bad.output


def test_a_samples_split_follows_its_question_not_its_trace(tmp_path):
    """Paraphrases of one question must land in one split, or the held-out set leaks into dev: a
    stored sample's fingerprint is its question's, and its split is that fingerprint's."""
    from ragmon.monitor.labeling.sampling import SamplingConfig, question_fingerprint, split_of

    events, _ = traffic(seed=5, traces=3000)
    questions = {e["trace_id"]: e["query"] for e in events if e.get("type") == "trace"}
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__HELDOUT_SHARE="0.5")
    feed(runtime, events)
    config = SamplingConfig(heldout_share=0.5)
    stored = SampleStore(runtime.engine).find()
    assert len(stored) > 100 and {s.split for s in stored} == {"dev", "heldout"}
    for sample in stored:
        assert sample.fingerprint == question_fingerprint(questions[sample.trace_id])
        assert sample.split == split_of(config.salt, sample.fingerprint, config.heldout_share)
    by_fingerprint: dict[str, set[str]] = {}
    for sample in stored:
        by_fingerprint.setdefault(sample.fingerprint, set()).add(sample.split)
    assert all(len(splits) == 1 for splits in by_fingerprint.values())
    runtime.close()


def test_only_the_samples_the_quota_keeps_are_redacted(tmp_path, monkeypatch):
    """Redacting a trace costs more than deciding its place, and a full week refuses most offers:
    the store redacts a sample when it keeps it, once, and never one it refuses."""
    from ragmon.monitor.labeling.redact import Redactor

    redacted: Counter[str] = Counter()
    redact_event = Redactor.redact_event

    def counting(self, event):
        redacted[event.trace_id] += 1
        return redact_event(self, event)

    monkeypatch.setattr(Redactor, "redact_event", counting)
    events, _ = traffic(traces=2000)
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__WEEKLY_CAP="5", RAGMON_SAMPLING__RATES='{"random": 1.0}')
    feed(runtime, events)
    refused = sum(metric_sum(runtime.registry, "ragmon_samples_dropped_total", reason=reason)
                  for reason in ("weekly_cap", "near_duplicate"))
    displaced = metric_sum(runtime.registry, "ragmon_samples_dropped_total", reason="displaced")
    stored = {s.trace_id for s in SampleStore(runtime.engine).find()}
    runtime.close()
    assert refused > 4 * len(stored) > 0  # most offers refused
    # a redaction per row stored: the rows kept, and those a lower-ranked trace displaced later
    assert set(redacted) >= stored
    assert sum(redacted.values()) <= len(stored) + displaced < refused / 4


# Chat turns, the conversation stratum and the split, decided by the sampler (docs/sampling.md,
# "Conversation samples" and "Strata and rates"), read back as the store keeps them.

def chat_turn(trace_id: str, query: str, *, conversation: str | None = "chat-1", turn: int | None = None,
              at: float = 0.0, tenant: str = "acme", caller: str | None = None, leak: bool = False) -> dict:
    """A trace of ``tenant``, a turn of ``conversation`` when given; ``leak``: a retrieved passage
    only group finance may read reaches a caller of group staff (a ``permission_violation``). The
    caller is the trace's own unless given, so that no question is taken for another's rephrase."""
    event = {"type": "trace", "trace_id": trace_id, "time": time.time() - 3600 + at, "tenant": tenant,
             "query": query, "index": {"name": "policies"},
             "caller": {"id": caller or f"u-{trace_id}", "groups": ["staff"]},
             "retrievals": [{"retriever": "vector", "passages": [
                 {"id": f"{trace_id}-p", "text": "Leave carries over.",
                  "acl": ["group:finance"] if leak else ["*"]}]}],
             "answer": {"text": "From the handbook.", "citations": []}}
    if conversation is not None:
        event["conversation_id"] = conversation
    if turn is not None:
        event["turn"] = turn
    return event


def stored_by_id(runtime) -> dict:
    return {s.trace_id: s for s in SampleStore(runtime.engine).find()}


def test_a_chat_turns_sample_carries_the_turns_before_it_by_turn_number(tmp_path):
    """Turn 3 is stamped before turn 2 (two services' clocks): the turn numbers, not the times,
    say which turns came before it, so its sample carries turns 1 and 2, in order; a first turn
    carries none and a trace without a conversation has no history."""
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0")
    feed(runtime, [chat_turn("t1", "What is the leave policy?", turn=1, at=0, caller="u-7"),
                   chat_turn("t2", "And for contractors?", turn=2, at=20, caller="u-7"),
                   chat_turn("t3", "And for interns?", turn=3, at=10, caller="u-7"),
                   chat_turn("solo", "Where is the expense form?", conversation=None)])
    stored = stored_by_id(runtime)
    runtime.close()
    history = stored["t3"].payload["history"]
    assert [(h["turn"], h["trace_id"], h["message"]) for h in history] == [
        (1, "t1", "What is the leave policy?"), (2, "t2", "And for contractors?")]
    assert stored["t1"].payload["history"] == []
    assert "history" not in stored["solo"].payload


def test_a_conversation_takes_one_place_whichever_of_its_turns_leak(tmp_path):
    """Turns 2 and 3 of chat-1 leak: each is a leak sample, and the lower-ranked of the two also
    holds the conversation's one place; turn 1, which did not trigger, is not sampled. chat-2's
    leaking turn asks what chat-1's turn 2 asked: another conversation, so a place of its own."""
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="0")
    feed(runtime, [chat_turn("c1", "What is the payroll date?", turn=1, at=1, caller="u-7")])
    feed(runtime, [chat_turn("c2", "And the salary bands?", turn=2, at=2, leak=True, caller="u-7")])
    feed(runtime, [chat_turn("c3", "And the bonus table?", turn=3, at=3, leak=True, caller="u-7")])
    feed(runtime, [chat_turn("d1", "And the salary bands?", conversation="chat-2", turn=1, at=4, leak=True)])
    stored = stored_by_id(runtime)
    runtime.close()
    holder = min(("c2", "c3"), key=lambda trace_id: rank_of("ragmon", trace_id))
    assert {t: sorted(s.strata) for t, s in stored.items()} == {
        "c2": ["permission_violation"], "c3": ["permission_violation"],
        holder: ["conversation", "permission_violation"], "d1": ["conversation", "permission_violation"]}


def test_a_conversation_is_drawn_by_its_tenant_and_id(tmp_path):
    """At rate 0.5 a leaking turn's conversation is sampled when hash(salt, "conversation", tenant
    NUL conversation_id) < 0.5: a conversation id is drawn in each tenant apart, so some chat is
    drawn in one tenant and not in the other."""
    from ragmon.monitor.labeling.sampling import selected

    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="0", RAGMON_SAMPLING__RATES__CONVERSATION="0.5")
    chats = [(tenant, f"chat-{n}") for tenant in ("acme", "globex") for n in range(8)]
    feed(runtime, [chat_turn(f"{tenant}-{chat}", f"Question {n} on the salary bands?", conversation=chat,
                             tenant=tenant, turn=1, leak=True) for n, (tenant, chat) in enumerate(chats)])
    stored = stored_by_id(runtime)
    runtime.close()
    drawn = {f"{tenant}-{chat}" for tenant, chat in chats
             if selected("ragmon", "conversation", f"{tenant}\x00{chat}", 0.5)}
    assert 0 < len(drawn) < len(chats)
    assert {c for t, c in chats if t == "acme" and f"acme-{c}" in drawn} != {
        c for t, c in chats if t == "globex" and f"globex-{c}" in drawn}
    assert {t for t, s in stored.items() if "conversation" in s.strata} == drawn
    assert len(stored) == len(chats)  # every leak is a sample, drawn for its conversation or not


def test_a_samples_split_is_its_questions_whatever_the_tenant_or_wording(tmp_path):
    """The split is decided by the question's fingerprint: a question asked in one tenant and
    reworded (case, punctuation, word order, "please") in another lands in the same split, the
    one hash(salt, "split", fingerprint) gives; at heldout_share 0.5 both splits are used."""
    from ragmon.monitor.labeling.sampling import question_fingerprint, split_of

    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0", RAGMON_SAMPLING__HELDOUT_SHARE="0.5")
    topics = ["leave form", "travel request", "payroll date", "salary bands", "bonus table", "office hours",
              "parking permit", "expense limit"]
    asked = {f"acme-{n}": f"Where is the {topic}?" for n, topic in enumerate(topics)}
    reworded = {f"globex-{n}": f"please, {topic.upper()} where IS" for n, topic in enumerate(topics)}
    feed(runtime, [chat_turn(trace_id, query, conversation=None, tenant=trace_id.split("-")[0])
                   for trace_id, query in {**asked, **reworded}.items()])
    stored = stored_by_id(runtime)
    runtime.close()
    assert sorted(stored) == sorted({**asked, **reworded})
    for n in range(len(topics)):
        assert stored[f"acme-{n}"].split == stored[f"globex-{n}"].split
        assert stored[f"acme-{n}"].split == split_of("ragmon", question_fingerprint(asked[f"acme-{n}"]), 0.5)
    assert {s.split for s in stored.values()} == {"dev", "heldout"}


# The sampling stage on its own (no pipeline, no database but the last test's SQLite file): the
# turn rows a chat turn gives, when a decision is None, and whose id a trace's draw is made of.

UNIT_KEY = "sampler-unit-test-key-0123456789"


def unit_turn(trace_id: str, *, conversation: str | None = "chat-1", caller: str = "u-7", turn: int | None = 1,
              query: str = "Where is the leave form?") -> dict:
    event = {"type": "trace", "trace_id": trace_id, "time": time.time() - 60, "tenant": "acme", "query": query,
             "index": {"name": "policies"}, "caller": {"id": caller, "groups": ["staff"]},
             "answer": {"text": "In the portal.", "citations": []}, "context": [{"id": "p1"}]}
    if conversation is not None:
        event["conversation_id"] = conversation
    if turn is not None:
        event["turn"] = turn
    return event


class SamplingStage:
    """A sampler behind the decoder and the signals, as the pipeline runs them for one event."""

    def __init__(self, **sampling) -> None:
        from ragmon.monitor.config.pipeline import Limits, SignalsConfig
        from ragmon.monitor.core.catalog import Catalog
        from ragmon.monitor.core.decode import Decoder
        from ragmon.monitor.core.signals.engine import SignalEngine
        from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
        from ragmon.monitor.labeling.sampler import Sampler
        from ragmon.monitor.labeling.sampling import SamplingConfig

        self.config = SamplingConfig(**sampling)
        self.decoder = Decoder(Limits(), time.time)
        self.signals = SignalEngine(SignalsConfig(), Catalog())
        self.sampler = Sampler(self.config, Redactor(RedactionConfig(caller_key=UNIT_KEY)), decoder=self.decoder,
                               recent_traces=100)

    def decide(self, event: dict, *, with_signals: bool = True) -> SamplingDecision | None:
        data = msgspec.json.encode(event)
        decoded = self.decoder.decode(data)
        return self.sampler.decide(decoded, self.signals.observe(decoded) if with_signals else None, data)


def keyed_hex(message: bytes) -> str:
    """The first 24 hex digits of HMAC-SHA256 keyed with the caller key (docs/sampling.md, "Redaction")."""
    import hashlib
    import hmac

    return hmac.new(UNIT_KEY.encode(), message, hashlib.sha256).hexdigest()[:24]


def drawn(salt: str, stratum: str, trace_id: str, rate: float) -> bool:
    """``hash(salt, stratum, trace_id) < rate``: BLAKE2b over the NUL-joined parts, its first 53
    bits over 2**53 (docs/sampling.md, "Strata and rates")."""
    import hashlib

    digest = hashlib.blake2b(f"{salt}\0{stratum}\0{trace_id}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 11) / 2**53 < rate


def test_a_chat_turn_gives_a_turn_row_named_by_its_conversations_and_callers_pseudonyms():
    # no stratum draws these turns: each decision is its turn row alone. The second conversation's
    # id is the first caller's id: keyed apart from callers, the two pseudonyms still differ
    stage = SamplingStage(rates={"random": 0.0})
    first = stage.decide(unit_turn("t-1", turn=2, query="Mail the form to jane.doe@example.com"))
    second = stage.decide(unit_turn("t-2", conversation="u-7", caller="u-8", turn=None))
    assert first is not None and second is not None and first.samples == second.samples == []
    assert first.turns == [{"trace_id": "t-1", "tenant": "acme",
                            "conversation": "conversation:" + keyed_hex(b"conversation\0chat-1"),
                            "caller": "caller:" + keyed_hex(b"u-7"), "turn": 2, "time": first.turns[0]["time"],
                            "message": "Mail the form to [EMAIL]", "searched": [], "answer": "In the portal."}]
    [row] = second.turns
    assert (row["trace_id"], row["turn"]) == ("t-2", None)
    assert row["conversation"] == "conversation:" + keyed_hex(b"conversation\0u-7") != first.turns[0]["caller"]
    assert row["caller"] == "caller:" + keyed_hex(b"u-8")


def test_no_turn_row_without_a_conversation_or_with_history_off():
    # sampling.history_turns 0 turns the feature off: no turn is kept (docs/configuration.md)
    for stage, event in ((SamplingStage(rates={"random": 0.0}), unit_turn("t-solo", conversation=None)),
                         (SamplingStage(rates={"random": 0.0}, history_turns=0), unit_turn("t-off"))):
        assert stage.decide(event) is None
    sampled = SamplingStage(rates={"random": 1.0}, history_turns=0).decide(unit_turn("t-kept"))
    assert sampled is not None and [s.trace_id for s in sampled.samples] == ["t-kept"] and sampled.turns == []


def test_an_event_that_samples_nothing_gives_no_decision():
    stage = SamplingStage(rates={"random": 0.0})
    assert stage.decide(unit_turn("t-held", conversation=None)) is None  # drawn for no stratum
    for event in ({"type": "document", "doc_id": "d-1", "tenant": "acme", "version": "v1",
                   "modified_at": "2026-10-30T17:15:48Z", "acl": ["tenant:acme"]},
                  {"type": "feedback", "trace_id": "t-held", "kind": "thumb", "value": "up"},
                  {"type": "feedback", "trace_id": "t-never-seen", "kind": "thumb", "value": "down"}):
        assert stage.decide(event) is None, event["type"]
    # a pipeline without a signals stage gives a trace no signals: no stratum, nothing decided
    assert SamplingStage(rates={"random": 1.0}).decide(unit_turn("t-unjudged", conversation=None),
                                                       with_signals=False) is None


def test_each_trace_is_drawn_by_its_own_id():
    stage = SamplingStage(rates={"random": 0.5})
    ids = [f"t-{n:02d}" for n in range(16)]
    expected = [t for t in ids if drawn(stage.config.salt, "random", t, 0.5)]
    assert 0 < len(expected) < len(ids)  # some traces are drawn, not all or none
    decisions = [stage.decide(unit_turn(t, conversation=None, query=f"Question {t}?")) for t in ids]
    assert [s.trace_id for d in decisions if d is not None for s in d.samples] == expected
    assert all(s.strata == {"random"} for d in decisions if d is not None for s in d.samples)


def test_a_batchs_turns_are_stored_before_its_samples_so_a_later_turn_carries_them(tmp_path):
    from ragmon.monitor.labeling.redact import RedactionConfig, Redactor
    from ragmon.monitor.storage.store import upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'ragmon.db'}")
    upgrade(engine)
    stage = SamplingStage(rates={"random": 1.0})
    writer = SampleWriter(SampleStore(engine, key_id=Redactor(RedactionConfig(caller_key=UNIT_KEY)).key_id),
                          stage.config)
    for event in (unit_turn("t-1", turn=1, query="What is the leave policy?"),
                  unit_turn("t-2", turn=2, query="And for contractors?")):
        writer.consume(SimpleNamespace(sampling=stage.decide(event)))
    assert writer.flush(1.0)
    stored = {s.trace_id: s for s in SampleStore(engine).find()}
    engine.dispose()
    assert stored["t-1"].payload["history"] == []
    assert [(h["trace_id"], h["turn"], h["message"], h["answer"]) for h in stored["t-2"].payload["history"]] == [
        ("t-1", 1, "What is the leave policy?", "In the portal.")]


def test_the_quotas_places_taken_and_refused_are_counted(tmp_path):
    # a stratum capped at one place a week: of two traces of one batch, one takes it, the other is
    # refused for the cap (docs/sampling.md: ragmon_samples_total, ragmon_samples_dropped_total)
    runtime = runtime_for(tmp_path, RAGMON_SAMPLING__RATES__RANDOM="1.0",
                          RAGMON_SAMPLING__WEEKLY_CAP_OVERRIDES__RANDOM="1")
    feed(runtime, [unit_turn("t-first", conversation=None, query="Where is the leave form?"),
                   unit_turn("t-second", conversation=None, query="Who signs the travel request?")])
    assert len(SampleStore(runtime.engine).find()) == 1
    assert metric_sum(runtime.registry, "ragmon_samples_total", tenant="acme", stratum="random") == 1
    assert metric_sum(runtime.registry, "ragmon_samples_dropped_total", reason="weekly_cap") == 1
    runtime.close()


def test_the_sampler_remembers_a_bounded_number_of_pseudonyms():
    # the last 4,096 pseudonyms of each kind are remembered (docs/performance.md): once that many
    # conversations and callers were seen, new ones take the places of old ones and the sampler's
    # memory stops growing. The signals are the first turn's for every turn, so that the signal
    # engine's own memories (bounded apart) stay out of the count.
    import gc
    import tracemalloc

    stage = SamplingStage(rates={"random": 0.0})
    first = stage.decoder.decode(msgspec.json.encode(unit_turn("t-0")))
    signals = stage.signals.observe(first)

    def turns(start: int, count: int) -> None:
        for n in range(start, start + count):  # one trace id: one held record, replaced each time
            data = msgspec.json.encode(unit_turn("t-0", conversation=f"chat-{n}", caller=f"u-{n}"))
            assert stage.sampler.decide(stage.decoder.decode(data), signals, data) is not None

    tracemalloc.start()  # from the start: what is forgotten later was counted when it was made
    try:
        turns(0, 4_200)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        turns(4_200, 1_000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # a pseudonym remembered, with its id, takes more than 100 bytes: 1,000 more of either kind
    # would add over 100 KB
    assert grown < 32_000
