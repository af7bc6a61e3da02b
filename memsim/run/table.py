"""The console table ``memsim run`` prints: a run's summary, key by key in the order
``memsim.report.summary_fields`` declares them. Each key that the table shows has a renderer
here (a line or a few, or none where the run has nothing to say); the others are in
``summary.json`` only."""
from __future__ import annotations

from collections.abc import Callable

from memsim.core.units import human_bytes
from memsim.report.summary_fields import FIELDS, Summary, scope_tag
from memsim.report.summary_records import ABSENT
from memsim.run import sensitivity

Lines = list[str]


def _header(s: Summary) -> Lines:
    w = s.workload
    if w.phase == "generate":
        shape = f"prompt={w.prompt} generate={w.generate}"
    elif w.tokens is not None:
        shape = f"tokens={w.tokens} context={w.context}"
    else:
        shape = f"source={w.source or 'trace'}"
    chip = s.hardware if s.derived_from is ABSENT else f"{s.hardware} ({s.derived_from})"
    return [f"{chip}  {w.model or '?'}  {w.phase or '?'}  batch={1 if w.batch is None else w.batch} {shape}"]


def _stack(s: Summary) -> Lines:
    """The runtime stack and what its software added: the host's time and the collective library's."""
    st = s.stack
    why = " (the chip's default: --stack to choose, docs/stacks.md)" if st.default else ""
    stalls, step = s.stall_s, s.step_time_s
    added = [f"{name} {stalls[key] * 1e3:.4g} ms" for key, name in (("host", "host"),
             ("collective_library", "collective library")) if stalls.get(key)]
    cost = f"; {', '.join(added)} of {step * 1e3:.4g} ms" if added else ""
    return [f"  stack            {st.name}, {st.launch} launches{why}{cost}"]


def _levels(s: Summary) -> Lines:
    """Each level's bytes; where SRAM capacity added some (re-fetches), how many of them."""
    return [f"  {lvl:<16} read {human_bytes(b.read):>14}  written {human_bytes(b.written):>14}"
            + (f"  ({b.capacity / b.total:.0%} re-fetched: capacity {human_bytes(b.capacity)})" if b.capacity else "")
            for lvl, b in s.bytes_per_level.items() if b.total]


def _placement(s: Summary) -> Lines:
    """Where the weights and the KV cache live, each level with its bytes."""
    names = {"weight": "weights", "kv": "KV cache"}
    parts = [f"{names.get(klass, klass)} " + ", ".join(f"{human_bytes(b)} in {lvl}" for lvl, b in levels.items())
             for klass, levels in s.placement.items() if levels]
    return [f"  placed           {'; '.join(parts)}"] if parts else []


def _chips(s: Summary) -> Lines:
    if s.chips <= 1:
        return []
    grid = s.grid
    return [f"  chips            {s.chips} (tp {grid.tp} x pp {grid.pp})   "
            f"exposed communication {s.exposed_comm_s * 1e3:.4f} ms"]


def _grid_search(s: Summary) -> Lines:
    fits = [g for g in s.grid_search if g.roofline_s is not ABSENT]
    simulated = sum(g.simulated_s is not ABSENT for g in fits)
    return [f"  grid             chosen: the fastest of {len(fits)} that fit ({simulated} simulated, the "
            f"others bounded by their roofline), of {len(s.grid_search)} tp x pp = {s.chips}"]


def _speculative(s: Summary) -> Lines:
    sp = s.speculative
    cost = f" (cost {sp.draft_cost:g})" if sp.draft_cost is not None else ""
    return [f"  speculative      draft {sp.draft}{cost}, K={sp.draft_k}, accept {sp.accept:g}: "
            f"{sp.tokens_per_step:.3f} tokens/step, {sp.time_per_token_s * 1e3:.4f} ms/token, "
            f"{sp.tokens_per_s_per_sequence:.1f} tokens/s per sequence",
            f"                   a step: draft {sp.draft_k} x {sp.draft_step_s * 1e3:.4f} ms + "
            f"verify {sp.verify_step_s * 1e3:.4f} ms = {sp.step_s * 1e3:.4f} ms"]


# What a chip gives for energy: with none of it, a run's energy is not zero but unknown.
NO_ENERGY = ("not modelled: the chip gives no energy (compute.energy, compute.vector_energy, a level's or "
             "link's energy, power.static)")


def _energy(s: Summary) -> Lines:
    e = s.energy_j
    if not e.total:
        return [f"  energy           {NO_ENERGY}"]
    moving = e.dynamic - e.compute
    return [f"  energy           {e.total:12.4f} J   compute {e.compute:.4f} J, data movement {moving:.4f} J, "
            f"static {e.static:.4f} J"]


def _power(s: Summary) -> Lines:
    if not s.energy_j.total:
        return []
    per_token = f", {s.energy_per_token_j:.4f} J/token" if s.energy_per_token_j else ""
    cap = f" (cap {s.power_cap_w:g} W per chip)" if s.power_cap_w else ""
    return [f"  power            {s.avg_power_w:12.1f} W avg, {s.peak_power_w:.1f} W peak{cap}{per_token}"]


def _clock(s: Summary) -> Lines:
    if not s.power_limited:  # the cap left the clock at its maximum
        return []
    mhz = f" ({s.clock_mhz:g} MHz)" if s.clock_mhz else ""
    if s.power_cap_unmet_w is not ABSENT:
        return [f"  clock            {s.clock:12.3f} of max{mhz}, the lowest the limiter sets, and still over the cap: "
                f"{s.chip_power_w:.1f} W a chip, {s.power_cap_unmet_w:.1f} W above {s.power_cap_w:g} W"]
    return [f"  clock            {s.clock:12.3f} of max{mhz}, lowered to fit the cap: {s.chip_power_w:.1f} W a chip"]


RENDER: dict[str, Callable[[Summary], Lines]] = {
    "hardware": _header,
    "stack": _stack,
    "step_time_s": lambda s: [f"  step time        {s.step_time_s * 1e3:12.4f} ms"],
    "roofline_s": lambda s: [f"  roofline         {s.roofline_s * 1e3:12.4f} ms  (bound: {s.roofline_bound}, "
                             f"x{s.step_over_roofline:.2f})"],
    "flops_total": lambda s: [f"  FLOPs            {s.flops_total:16.4e}   "
                              f"utilisation {s.compute_utilization * 100:.1f}%"],
    "bytes_per_level": _levels,
    "placement": _placement,
    "compute_busy_s": lambda s: [f"  compute busy     {s.compute_busy_s * 1e3:12.4f} ms"],
    "chips": _chips,
    "grid_search": _grid_search,
    "ttft_s": lambda s: [f"  generation       ttft {s.ttft_s * 1e3:.3f} ms, tpot {s.tpot_s * 1e3:.3f} ms, "
                         f"total {s.total_s:.4f} s, {s.tokens_per_s:.1f} tokens/s"],
    "speculative": _speculative,
    "stall_s": lambda s: [f"  stall {cause:<13} {sec * 1e3:9.4f} ms"
                          for cause, sec in sorted(s.stall_s.items(), key=lambda kv: -kv[1])],
    "energy_j": _energy,
    "avg_power_w": _power,
    "power_limited": _clock,
    "estimates": lambda s: sensitivity.lines(s.estimates, s.step_time_s),
}


def table(summary: Summary) -> str:
    """The console table of a run's summary: each declared key it has, in order, as rendered; with
    several chips, each key's first line tagged with whose figure it is (its declared ``scope``)."""
    out: Lines = []
    for name in FIELDS:
        if name in RENDER and getattr(summary, name) is not ABSENT:
            lines = RENDER[name](summary)
            tag = scope_tag(FIELDS[name].metadata["scope"], summary.chips, summary.grid.pp)
            out += [f"{lines[0]}   [{tag}]", *lines[1:]] if lines and tag else lines
    return "\n".join(out)
