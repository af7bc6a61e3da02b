"""The ``memsim`` console script: Ctrl-C at any moment, even while the command line's
libraries load, is one line and exit code 130 (``memsim.cli`` does the rest)."""
from __future__ import annotations

import signal
import sys


def entry() -> None:
    try:
        try:
            from memsim.cli import entry as run

            run()
        finally:  # the work is done or being reported: a Ctrl-C from here on is not a traceback either
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        interrupted()


def interrupted() -> None:
    """One line on stderr, exit code 130 (128 + SIGINT)."""
    try:
        sys.stderr.write("memsim: interrupted\n")
        sys.stderr.flush()
    finally:
        sys.exit(130)
