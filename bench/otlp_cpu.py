"""CPU per OTLP trace, in process: the requests of ``bench.otlp`` (OpenInference spans, 2 a trace
and 10 documents, protobuf, 50 traces a request) through the receiver and the pipeline, wired as
`ragmon serve` wires them (``build_runtime``, ``build_otlp``) but without HTTP or threads: each
request is received (parsed, its spans read by their dialects, assembled) and every
``DELIVER_EVERY`` requests the assembled traces are mapped and go through the pipeline.

Printed: CPU milliseconds a trace (``time.process_time``, which does not count the waits of a
shared machine, unlike a rate), the pipeline's share, and the rest (parsing, reading, assembling,
mapping, encoding). The first ``WARM_UP`` traces are not counted. ``--bodies FILE`` keeps the
requests in FILE (made once, then read), so that two commits are measured on the same bytes;
``--profile FILE`` writes a cProfile of the measured part. ``--upto parse|read|map`` instead
only parses the requests, then reads their spans, then maps their traces, without the runtime:
for counting instructions (``valgrind --tool=callgrind``), which a busy machine does not change;
one stage's count is the difference of two runs. ``python -m bench.otlp_cpu [--traces N]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pickle
import tempfile
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

TRACES = 8_000  # measured, after the warm-up
WARM_UP = 2_000  # other traces (a trace seen twice would be dropped as a duplicate)
DELIVER_EVERY = 10  # requests (500 traces): about what `ragmon serve` delivers a round at the bench's rate


def bodies(traces: int, path: Path | None) -> list[bytes]:
    """The request bodies of ``traces`` traces, from ``path`` when it holds enough of them."""
    from bench.otlp import PER_REQUEST, otlp_bodies

    wanted = -(-traces // PER_REQUEST)
    if path is not None and path.exists():
        kept = pickle.loads(path.read_bytes())
        if len(kept) >= wanted:
            return kept[:wanted]
    made = otlp_bodies(traces)
    if path is not None:
        path.write_bytes(pickle.dumps(made))
    return made


def measure(requests: list[bytes], warm_up: int, profile: Path | None = None) -> dict[str, float]:
    """Feed ``requests`` (the first ``warm_up`` of them not counted); the CPU figures per trace."""
    from bench.otlp import PER_REQUEST
    from ragmon.monitor.app.wiring import build_otlp, build_runtime, settle_start_up_objects
    from ragmon.monitor.config.settings import load_settings

    with tempfile.TemporaryDirectory(prefix="ragmon-otlp-cpu-") as scratch:
        settings = load_settings(environ={"RAGMON_DATABASE__URL": f"sqlite:///{scratch}/ragmon.db",
                                          "RAGMON_DEAD_LETTER__PATH": f"{scratch}/dead.jsonl",
                                          "RAGMON_OTLP__MAX_PENDING_BYTES": str(10**9)})
        runtime = build_runtime(settings, registry=CollectorRegistry())
        pipeline_cpu = [0.0]
        process = runtime.pipeline.process

        def timed_process(records):
            started = time.process_time()
            try:
                return process(records)
            finally:
                pipeline_cpu[0] += time.process_time() - started

        runtime.pipeline.process = timed_process  # the receiver delivers through it: the pipeline timed alone
        receiver = build_otlp(runtime)
        settle_start_up_objects()

        def feed(part: list[bytes]) -> float:
            started = time.process_time()
            for n, body in enumerate(part, 1):
                answer = receiver.receive(body, "application/x-protobuf")
                assert answer.status == 200, answer.body[:200]
                if n % DELIVER_EVERY == 0 or n == len(part):
                    receiver.shutdown(0)  # no thread was started: this delivers every trace assembled
            return time.process_time() - started

        def answered() -> float:
            return sum(sample.value for metric in runtime.registry.collect()
                       for sample in metric.samples if sample.name == "ragmon_answers_total")

        feed(requests[:warm_up])
        pipeline_cpu[0], before = 0.0, answered()
        profiler = cProfile.Profile() if profile is not None else None
        if profiler is not None:
            profiler.enable()
        total = feed(requests[warm_up:])
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        counted = answered() - before
        runtime.close()
    traces = (len(requests) - warm_up) * PER_REQUEST
    return {"traces": traces, "answered": counted, "cpu_ms_per_trace": 1000 * total / traces,
            "pipeline_ms_per_trace": 1000 * pipeline_cpu[0] / traces,
            "otlp_ms_per_trace": 1000 * (total - pipeline_cpu[0]) / traces}


def stages(requests: list[bytes], upto: str) -> None:
    """Parse ``requests``; then, up to ``upto``, read their spans and map their traces."""
    from ragmon.collectors.otlp_wire import parse_protobuf
    from ragmon.collectors.span_mapping import SpanMapper

    mapper = SpanMapper()
    parsed = [parse_protobuf(body) for body in requests]
    if upto == "parse":
        return
    for spans in parsed:
        for span in spans:
            span.reading = mapper.dialects.read(span)
    if upto == "read":
        return
    for spans in parsed:
        traces: dict[str, list] = {}
        for span in spans:
            traces.setdefault(span.trace_id, []).append(span)
        for trace in traces.values():
            mapper.map(trace)


def main() -> None:
    from bench.otlp import PER_REQUEST

    parser = argparse.ArgumentParser(prog="python -m bench.otlp_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=TRACES, help="traces measured, after the warm-up")
    parser.add_argument("--bodies", type=Path, help="keep the request bodies in this file (made once, then read)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the measured part to this file")
    parser.add_argument("--upto", choices=("parse", "read", "map"),
                        help="only these stages of --traces traces, without the runtime (for instruction counts)")
    arguments = parser.parse_args()
    if arguments.upto:
        stages(bodies(arguments.traces, arguments.bodies), arguments.upto)
        return
    requests = bodies(WARM_UP + arguments.traces, arguments.bodies)
    gc.collect()
    figures = measure(requests, WARM_UP // PER_REQUEST, arguments.profile)
    print(f"OTLP in process: {figures['traces']:,} traces ({figures['answered']:,.0f} answered), CPU ms a trace: "
          f"{figures['cpu_ms_per_trace']:.3f} (pipeline {figures['pipeline_ms_per_trace']:.3f}, "
          f"the rest {figures['otlp_ms_per_trace']:.3f})", flush=True)


if __name__ == "__main__":
    main()
