"""Local process pools for experiments (sweeps, serving sweeps, explain): how many workers a machine
holds, and workers that leave Ctrl-C to their parent and die with it."""
from __future__ import annotations

import os
import warnings

from memsim import units
from memsim.errors import MemsimWarning, run_field

PER_WORKER = 512 * 2**20  # bytes a pool worker may hold (estimate, 300-700 MiB: its imports and one point's run)


def worker_cap() -> int:
    """The pool workers this machine holds: one a core, at most one per ``PER_WORKER`` of the
    memory available."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, _available_memory() // PER_WORKER))


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**62  # unknown: cores alone cap the pool


def pool_size(requested: int | None, total: int) -> int:
    cap = worker_cap()
    if requested is not None and requested > cap:
        warnings.warn(f"{run_field('workers')} {requested} is more than this machine holds: {cap} (a core each, "
                      f"{units.human_bytes(PER_WORKER)} of available memory each)", MemsimWarning, stacklevel=3)
    return max(1, min(requested or cap, cap, total))


def worker_start(parent: int) -> None:
    """Pool worker start-up: Ctrl-C is the sweep's to handle (the worker ignores it), and the
    worker ends when the sweep's process dies, even by SIGKILL."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """End this worker when the sweep's process dies, even by SIGKILL."""
    import signal
    import threading
    import time

    try:  # Linux: the kernel signals the worker when its parent exits
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:  # elsewhere (and as a second guard): the parent's pid goes away
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
