"""`make bench`: every benchmark, printing its figures."""

from bench import decode, replay

if __name__ == "__main__":
    decode.run()
    replay.run()
