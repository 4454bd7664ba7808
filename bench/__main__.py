"""`make bench`: every benchmark, printing its figures."""

from bench import alert_latency, decode, replay

if __name__ == "__main__":
    decode.run()
    replay.run()
    alert_latency.run()
