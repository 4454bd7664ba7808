"""`make bench`: every benchmark, printing its figures, then each target with its figure (about 40
minutes on 2 cores). Exits 1 when a figure docs/performance.md reports as meeting its target falls
short of it (bench/targets.py)."""

import sys

from bench import alert_latency, decode, http_metrics, kafka, memory, otlp, replay, scale_out, targets

if __name__ == "__main__":
    figures: dict[str, float] = {}
    figures |= decode.run()
    http_metrics.run()
    figures |= replay.run()
    figures |= otlp.run(phoenix=True)
    figures |= kafka.run()
    figures |= scale_out.run()
    figures |= alert_latency.run()
    figures |= memory.in_own_process()
    sys.exit(targets.check(figures))
