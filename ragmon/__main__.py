"""The ``ragmon`` command. The base install carries only the emitter; the command needs the server
extra, and says so instead of failing with a traceback when it is missing."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from ragmon.monitor.app.cli import main as cli_main
    except ModuleNotFoundError as missing:
        if (missing.name or "").startswith("ragmon"):
            raise  # our own module: a broken install, not a missing extra
        print(f"ragmon: the monitor is not installed (no module {missing.name!r}); "
              "install it with: pip install 'ragmon[server]'", file=sys.stderr)
        raise SystemExit(2) from None
    cli_main()


if __name__ == "__main__":
    main()
