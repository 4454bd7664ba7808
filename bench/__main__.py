"""`make bench`: every benchmark, printing its figures (about 25 minutes on 2 cores)."""

from bench import alert_latency, decode, http_metrics, kafka, memory, otlp, replay

if __name__ == "__main__":
    decode.run()
    http_metrics.run()
    replay.run()
    otlp.run(phoenix=True)
    kafka.run()
    alert_latency.run()
    memory.run()
