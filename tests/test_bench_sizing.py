"""`python -m bench.sizing`, small: each catalog size measured in a process of its own, a figure of each
kind per size (the figures themselves are docs/sizing.md's, measured on a quiet machine)."""

from __future__ import annotations

import pytest

from bench import sizing


@pytest.mark.slow
def test_a_small_sizing_run_measures_each_size_in_its_own_process(capsys):
    figures = sizing.run((30, 300), traces=200)
    for documents in (30, 300):
        one = {name.removeprefix(f"sizing_{documents}_"): value for name, value in figures.items()
               if name.startswith(f"sizing_{documents}_")}
        assert set(one) == {"rss_empty_mb", "rss_catalog_mb", "rss_traffic_mb", "cpu_ms_per_catalog_event",
                            "cpu_ms_per_trace"}
        assert 0 < one["rss_empty_mb"] <= one["rss_catalog_mb"] + 5  # RSS read in the process that built it
        assert one["cpu_ms_per_trace"] > 0 and one["cpu_ms_per_catalog_event"] > 0
    table = capsys.readouterr().out
    assert "documents" in table and "CPU ms/trace" in table
