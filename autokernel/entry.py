"""The `autokernel` script's entry point: the command line, with Ctrl-C during start-up a
one-line exit.

The commands import torch (one to several seconds); a Ctrl-C in that time comes before any
command's own handling and printed a 30-line KeyboardInterrupt traceback. Nothing has been
written then, so the message says just that.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from autokernel.cli import main as cli_main
    except KeyboardInterrupt:
        print("interrupted while starting: nothing was written", file=sys.stderr)
        raise SystemExit(130) from None
    cli_main()
