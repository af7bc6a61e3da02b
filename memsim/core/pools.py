"""Where an experiment's points run (sweeps, serving sweeps, explain), the one runner they share
(``run_each``): local process pools (how many workers a machine holds; workers that leave Ctrl-C to
their parent and die with it) and Dask clusters (``connect``: a scheduler's address checked and
reached, or one line), each point handed back as it finishes, with a few queued a worker."""
from __future__ import annotations

import itertools
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from memsim.core import units
from memsim.core.errors import ConfigError, MemsimError, MemsimWarning, run_field

CONNECT_S = 10  # seconds to reach a Dask scheduler
IN_FLIGHT = 2  # points queued for each worker
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


def check_workers(workers: Any) -> None:
    """Refuse a ``workers`` that is not a whole number of at least 1 (None: every core)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"must be a whole number of at least 1, got {units.shown(workers)}", field=run_field("workers"))


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


ADDRESS = re.compile(r"(tcp|tls|ws|wss|ucx|inproc)://[^\s/]+(:\d{1,5})?/?")


def connect(address: Any):
    """A Dask client on ``address`` (a client is used as it is); an address that is malformed,
    refuses or does not answer within ``CONNECT_S`` is one line, before anything is written."""
    if hasattr(address, "submit"):
        return address
    text = str(address)
    if not ADDRESS.fullmatch(text):
        raise ConfigError(f"expected a scheduler address such as tcp://host:8786, got {units.shown(text)}",
                          field=run_field("scheduler"))
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("Dask is not installed (pip install '.[dask]')", field=run_field("scheduler")) from None
    port = text.rstrip("/").rpartition(":")[2]
    if port.isdigit() and not 0 < int(port) < 65536:
        raise ConfigError(f"port {port} is not a port (1 to 65535)", field=run_field("scheduler"))
    made: list = []

    def connect() -> None:  # a scheduler that accepts but never answers can hold Client past its timeout
        try:
            made.append(Client(text, timeout=f"{CONNECT_S}s", set_as_default=False))
        except Exception as exc:  # OSError, TimeoutError, ValueError: all mean "not reached"
            made.append(exc)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(CONNECT_S + 2)
    if made and not isinstance(made[0], Exception):
        return made[0]
    exc = made[0] if made else TimeoutError("no answer")
    reason = str(exc).strip().splitlines()[0][:100] if str(exc).strip() else type(exc).__name__
    raise ConfigError(f"cannot reach the scheduler within {CONNECT_S} s ({reason})", field=run_field("scheduler"))


def run_each(fn: Callable[..., Any], calls: Iterator[tuple], done: Callable[[Any], None], *, workers: int = 1,
             client: Any = None, lost: str = "", file: str | None = None) -> None:
    """``fn(*args)`` for each ``args`` of ``calls`` (made one at a time, as points are queued), each result
    handed to ``done`` as it finishes: on the Dask ``client``, else a local pool of ``workers`` processes
    (1: here, in order). A pool worker killed from outside is one line (``lost`` says what is kept, ``file``
    where); an error in ``done`` (a point that stops the experiment) cancels what is queued."""
    if client is not None:
        _on_dask(fn, calls, done, client)
    elif workers <= 1:
        for args in calls:
            done(fn(*args))
    else:
        _on_pool(fn, calls, done, workers, lost, file)


def _on_pool(fn: Callable[..., Any], calls: Iterator[tuple], done: Callable[[Any], None], workers: int, lost: str,
             file: str | None) -> None:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, initializer=worker_start, initargs=(os.getpid(),))
    pending: set = set()
    try:
        for queued in itertools.chain(calls, [None]):  # None: the last, after which every point is awaited
            if queued is not None:
                pending.add(pool.submit(fn, *queued))
            while pending and (queued is None or len(pending) >= workers * IN_FLIGHT):
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    done(fut.result())
    except BrokenProcessPool:
        pool.shutdown(wait=False, cancel_futures=True)
        raise MemsimError(f"a worker process died (killed from outside, as by the out-of-memory killer){lost}",
                          file=file, field=run_field("workers")) from None
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _on_dask(fn: Callable[..., Any], calls: Iterator[tuple], done: Callable[[Any], None], client: Any) -> None:
    from distributed import as_completed

    window = max(1, sum(client.nthreads().values())) * IN_FLIGHT
    submit = lambda args: client.submit(fn, *args, pure=False)
    live = {submit(args) for args in itertools.islice(calls, window)}
    flow = as_completed(list(live))
    try:
        for fut in flow:
            live.discard(fut)
            done(fut.result())
            for args in itertools.islice(calls, 1):
                nxt = submit(args)
                live.add(nxt)
                flow.add(nxt)
    except BaseException:
        client.cancel(list(live))
        raise

