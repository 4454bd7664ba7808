"""`make bench` as a check: a figure reported as met that falls short fails it; a figure reported
as missed does not, whatever its value. And a path whose ratio to the decode ceiling fell more than
15% below the last sitting's record fails it, met target or not."""

from __future__ import annotations

import re

import pytest

from bench import ratios
from bench.ratios import (
    HEADER,
    RATED,
    RECORD_MARKER,
    MalformedRecord,
    Measured,
    parse_record,
    read_record,
    record_markdown,
)
from bench.ratios import check as ratios_check
from bench.targets import TARGETS, check


def figures_meeting_every_target() -> dict[str, float]:
    return {t.figure: t.goal for t in TARGETS}


def test_every_target_at_its_goal_passes(capsys):
    assert check(figures_meeting_every_target()) == 0
    out = capsys.readouterr().out
    assert all(t.what in out for t in TARGETS)


def test_a_kept_target_falling_short_or_unmeasured_fails(capsys):
    for target in (t for t in TARGETS if t.met):
        short = figures_meeting_every_target()
        short[target.figure] = target.goal * (0.9 if target.at_least else 1.1)
        assert check(short) == 1, target.figure
        assert "SHORT - reported as met" in capsys.readouterr().out
        del short[target.figure]
        assert check(short) == 1, target.figure


def test_a_missed_target_is_reported_not_failed(capsys):
    figures = figures_meeting_every_target()
    for target in (t for t in TARGETS if not t.met):
        figures[target.figure] = target.goal / 3
    assert check(figures) == 0
    out = capsys.readouterr().out
    assert out.count("missed, as reported") == sum(not t.met for t in TARGETS)
    # how far each is from its goal: a third of an at-least goal is 3x short
    assert out.count("(short by 3x)") == sum(not t.met and t.at_least for t in TARGETS) > 0


def test_a_run_of_some_benchmarks_checks_only_the_targets_they_measured(capsys):
    kept = next(t for t in TARGETS if t.met)
    assert check({kept.figure: kept.goal}, every_one_run=False) == 0
    assert check({}, every_one_run=False) == 0
    assert kept.what in capsys.readouterr().out
    assert check({}) == 1  # the whole of make bench must measure every kept target


# The ratio check: a path's ratio to the decode ceiling against the last sitting's record.

RECORDED = {"replay_records_per_second": 0.08, "otlp_traces_per_second": 0.025}


def measured_at(change: dict[str, float], ceiling: float = 40_000.0) -> dict[str, Measured]:
    """Each recorded figure measured beside ``ceiling`` at its recorded ratio times 1 + its change."""
    return {figure: Measured(RECORDED[figure] * (1 + change.get(figure, 0.0)) * ceiling, ceiling)
            for figure in RECORDED}


def test_a_ratio_fallen_16_percent_fails_naming_the_figure_and_by_how_much(capsys):
    assert ratios_check(measured_at({"otlp_traces_per_second": -0.16}), RECORDED) == 1
    out = capsys.readouterr().out
    assert "make bench fails: otlp_traces_per_second fell 16% below the last sitting's ratio" in out
    assert "replay_records_per_second fell" not in out
    assert "SLOWER by 16%" in out


def test_a_ratio_fallen_14_percent_passes(capsys):
    assert ratios_check(measured_at({"otlp_traces_per_second": -0.14, "replay_records_per_second": -0.14}),
                        RECORDED) == 0
    assert "make bench fails" not in capsys.readouterr().out


def test_a_faster_figure_passes_and_a_slower_machine_alone_does_not_fail(capsys):
    assert ratios_check(measured_at({"replay_records_per_second": 0.5}), RECORDED) == 0
    assert "faster" in capsys.readouterr().out
    # every figure at half its rate, the ceiling at half too: the same ratios, a slower hour
    assert ratios_check(measured_at({}, ceiling=20_000.0), RECORDED) == 0


def test_a_figure_missing_from_the_record_is_new_not_failed(capsys):
    measured = measured_at({}) | {"kafka_traces_per_second": Measured(1.0, 40_000.0)}
    assert ratios_check(measured, RECORDED) == 0
    assert "kafka_traces_per_second" in (out := capsys.readouterr().out) and "new: not in the record" in out
    assert ratios_check({}, RECORDED) == 0  # a run of other benchmarks: nothing rated, nothing failed
    assert "not measured" in capsys.readouterr().out


def test_the_record_a_run_prints_reads_back_as_its_ratios():
    measured = {figure: Measured(1_000.0 * (number + 1), 42_076.0) for number, figure in enumerate(RATED)}
    # the record keeps three significant digits
    assert parse_record(f"# Performance\n\nsome prose\n\n{record_markdown(measured)}\nmore prose\n") == {
        figure: pytest.approx(m.ratio, rel=5e-3) for figure, m in measured.items()}


def test_the_real_record_in_docs_performance_md_parses():
    recorded = read_record()
    assert set(recorded) == set(RATED)  # the whole of make bench rates these, and the record holds them all
    assert all(0 < ratio < 1 for ratio in recorded.values())


GOOD = record_markdown({"otlp_traces_per_second": Measured(1_000.0, 40_000.0)})


@pytest.mark.parametrize(("record", "named"), [
    ("no marker here\n", "0 lines hold the record's marker"),
    (GOOD + "\n" + GOOD, "2 lines hold the record's marker"),
    (GOOD.replace(HEADER, "| figure | ratio |"), "the record must start with"),
    (RECORD_MARKER + "\n\n" + HEADER + "\n", "the record must start with"),
    (GOOD.replace("| 0.025 |", "| 0.025 | extra |"), "a row of the record has 4 cells, this one 5"),
    (GOOD.replace("otlp_traces_per_second", "otlp_traces_per_secnd"), "'otlp_traces_per_secnd' is not a figure"),
    (GOOD + GOOD.splitlines()[-1] + "\n", "otlp_traces_per_second is in the record twice"),
    (GOOD.replace("| 0.025 |", "| fast |"), "the ratio of otlp_traces_per_second must be a positive number"),
    (GOOD.replace("| 0.025 |", "| -0.025 |"), "must be a positive number, not '-0.025'"),
    (GOOD.replace("| 0.025 |", "| nan |"), "must be a positive number, not 'nan'"),
    (GOOD.replace("| 0.025 |", "| inf |"), "must be a positive number, not 'inf'"),
    ("\n".join(GOOD.splitlines()[:3]) + "\n", "the record holds no figure"),
])
def test_a_malformed_record_is_a_clear_error(record, named):
    with pytest.raises(MalformedRecord, match=re.escape(named)):
        parse_record(record)


def test_make_bench_stops_before_measuring_when_the_record_is_malformed(tmp_path, monkeypatch, capsys):
    import bench.__main__ as make_bench

    broken = tmp_path / "performance.md"
    broken.write_text(GOOD.replace("| 0.025 |", "| fast |"))
    monkeypatch.setattr(ratios, "RECORD", broken)
    monkeypatch.setattr(make_bench.replay, "measure_ceiling", lambda: pytest.fail("measured"))
    assert make_bench.main(["otlp"]) == 2
    assert "the ratio of otlp_traces_per_second must be a positive number" in capsys.readouterr().err
    assert make_bench.main(["otpl"]) == 2
    assert "no benchmark named otpl" in capsys.readouterr().err


def test_make_bench_compares_with_the_record_a_saved_run_holds(tmp_path, monkeypatch, capsys):
    import bench.__main__ as make_bench

    saved = tmp_path / "base.txt"  # a run's output: its figures, then its record
    saved.write_text("replay: ...\n\nthis run's record:\n\n"
                     + record_markdown({"replay_records_per_second": Measured(3_000.0, 40_000.0)}))
    monkeypatch.setattr(make_bench.replay, "measure_ceiling", lambda: 40_000.0)
    monkeypatch.setattr(make_bench.replay, "run", lambda ceiling: {"replay_records_per_second": 2_500.0})
    assert make_bench.main(["replay"], saved) == 1
    assert "replay_records_per_second fell 17% below" in capsys.readouterr().out
    monkeypatch.setattr(make_bench.replay, "run", lambda ceiling: {"replay_records_per_second": 2_600.0})
    assert make_bench.main(["replay"], saved) == 0
    assert f"record ({saved})" in capsys.readouterr().out


def test_a_fallen_path_is_measured_again_and_fails_only_when_it_falls_twice(tmp_path, monkeypatch, capsys):
    import bench.__main__ as make_bench

    saved = tmp_path / "base.txt"
    saved.write_text(record_markdown({"replay_records_per_second": Measured(3_000.0, 40_000.0)}))
    monkeypatch.setattr(make_bench.replay, "measure_ceiling", lambda: 40_000.0)
    rates = iter([2_000.0, 2_900.0, 2_400.0, 2_000.0])  # a noisy first run, then a slowdown measured twice
    monkeypatch.setattr(make_bench.replay, "run", lambda ceiling: {"replay_records_per_second": next(rates)})
    assert make_bench.main(["replay"], saved) == 0
    out = capsys.readouterr().out
    assert "replay: replay_records_per_second fell more than 15% below the record; measuring it again" in out
    assert "make bench fails" not in out
    assert make_bench.main(["replay"], saved) == 1
    assert "replay_records_per_second fell 20% below" in capsys.readouterr().out  # the better of the two runs
