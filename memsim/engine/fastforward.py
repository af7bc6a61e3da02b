"""Fast-forward: skip whole cycles of a step whose pipeline has become periodic.

A step repeats identical chunks. After each chunk the observer records the step's state
(``StepRun.state``: in-flight loads, pending stores, the queues and horizons of its
resources, all relative to now). Once the state equals the state ``q`` chunks earlier and
the last two cycles took equal time, the future provably repeats every ``q`` chunks, for as
long as nothing else touches the step's resources. The observer then moves every event the
step has scheduled, and every time it holds, ``k`` cycles later, accounts the skipped chunks
(busy time, stalls, bytes, resource occupancy) and lets the step sleep through them.

``k`` is bounded by the chunks left and by ``quiet_until``: the earliest time another task
could touch the step's resources (the scheduler's answer), so a skip never hides contention.
A history in which another task touched those resources is discarded.

Rounding to whole picoseconds can, rarely, make the exact cycle longer than ``MAX_CYCLE``.
After ``APPROX_AFTER`` chunks without one, the last ``APPROX_WINDOW`` chunks are repeated
instead; the run's statistics count such steps as approximate.
"""
from __future__ import annotations

from typing import Callable

from memsim.engine.pipeline import StepRun
from memsim.engine.resources import Use

MIN_PREFIX = 4  # chunks before looking for a periodic state
MAX_CYCLE = 32  # longest cycle (in chunks) the detector looks for
APPROX_AFTER = 2048
APPROX_WINDOW = 512


def find_cycle(states: list[tuple], completions: list[int], depth: int) -> int | None:
    """Smallest q such that the state after the latest chunk equals the state q chunks
    earlier and the last two cycles of q chunks took equal time."""
    for q in range(1, MAX_CYCLE + 1):
        if len(completions) < max(MIN_PREFIX, depth + 1) + 2 * q:
            return None
        c = completions
        if states[-1] == states[-1 - q] and c[-1] - c[-1 - q] == c[-1 - q] - c[-1 - 2 * q]:
            return q
    return None


class FastForward:
    """The observer of one step: records its history and skips cycles when it may."""

    def __init__(self, quiet_until: Callable[[StepRun], float], shift_events: Callable[[object, int], None],
                 shared: Callable[[StepRun], list] = lambda run: []) -> None:
        self.quiet_until = quiet_until
        self.shared = shared
        self.shift_events = shift_events
        self.states: list[tuple] = []
        self.completions: list[int] = []
        self.stalls: list[dict] = []
        self.switches: tuple[int, ...] | None = None
        self.approximate = False

    def _clean(self, run: StepRun) -> None:
        """Forget the history if another task touched the step's resources since it began."""
        switches = tuple(s.switches for s in run.footprint())
        if switches != self.switches:
            self.switches = switches
            self.states, self.completions, self.stalls = [], [], []

    def __call__(self, run: StepRun) -> int:
        now = run.env.now
        self._clean(run)
        self.states.append(run.state())
        self.completions.append(now)
        self.stalls.append(dict(run.chunk_stalls))
        q = find_cycle(self.states, self.completions, run.step.depth)
        approximate = False
        if q is None and len(self.completions) >= APPROX_AFTER:
            q, approximate = APPROX_WINDOW, True
        if q is None:
            return 0
        cycle_ps = self.completions[-1] - self.completions[-1 - q]
        cycles = (run.step.count - run.issued) // q
        quiet = self.quiet_until(run)
        if cycle_ps > 0 and quiet != float("inf"):
            cycles = min(cycles, int((quiet - now) // cycle_ps))
        if cycles < 1 or cycle_ps <= 0:
            return 0
        # A prefetch (which yields to this step) may use a resource this step leaves idle at
        # times: skipping would starve it. Skip only if the step keeps every such resource busy.
        if any(q * _hold(run, server) != cycle_ps for server in self.shared(run)):
            return 0
        self.approximate |= approximate
        delta = cycles * cycle_ps
        self.shift_events(run, delta)
        shift_step(run, delta)
        _account(run, cycles, q, self.stalls[-q:])
        self.states, self.completions, self.stalls = [], [], []
        return delta


def _account(run: StepRun, cycles: int, q: int, stalls: list[dict]) -> None:
    """The skipped chunks' busy time, stalls, bytes and resource occupancy."""
    step, n = run.step, cycles * q
    for chunk in stalls:
        for key, ps in chunk.items():
            run.stalls[key] = run.stalls.get(key, 0) + ps * cycles
    run.busy_ps += step.compute_ps * n
    run.unpack_ps += step.unpack_ps * n
    run.res.compute.busy_ps += step.compute_ps * n
    for port, hold, via_hold, _, _ in run.loads + run.stores:
        port.busy_ps += hold * n
        if via_hold is not None:
            port.via.busy_ps += via_hold * n
    run.issued += n
    run.consumed += n


def _hold(run: StepRun, server) -> int:
    """How long one chunk of the step holds ``server``."""
    total = run.step.compute_ps if server is run.res.compute else 0
    for port, hold, via_hold, _, _ in run.loads + run.stores:
        total += (hold if port is server else 0) + (via_hold if port.via is server and via_hold else 0)
    return total


def shift_step(run: StepRun, delta: int) -> None:
    """Move every time the step holds by ``delta`` (fast-forward skipped that long)."""
    for c in run.pending:
        c.issued += delta
        c.landed += delta
        for use, via, _, _ in c.transfers:
            _shift_use(use, delta)
            _shift_use(via, delta)
    for b in run.outstanding:
        b.computed += delta
        for use, via, _ in b.uses:
            _shift_use(use, delta)
            _shift_use(via, delta)
    for s in run.footprint():
        s.horizon += delta
    if run.waiting is not None:
        asked, frees = run.waiting
        run.waiting = (asked + delta, tuple(f + delta for f in frees))
    computed, freed, writer = run.released
    run.released = (computed + delta, freed + delta, writer)
    run.unpacking += delta
    run.last_store += delta
    run.idle_since += delta
    run.last_compute += delta
    for ext in run.extent.values():
        ext[1] += delta


def _shift_use(use: Use | None, delta: int) -> None:
    if use is None:
        return
    use.requested += delta
    if use.start >= 0:
        use.start += delta
    if use.end >= 0:
        use.end += delta
