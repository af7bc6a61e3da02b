"""Capacity at an SLO (``memsim capacity``): the highest rate of drawn requests a deployment serves with
its time-to-first-token and time-per-output-token percentiles within their SLOs, without falling behind.

Each rate tried is a serving run of ``duration`` seconds of arrivals (as many requests as arrive), its
first ``warmup`` seconds served but not measured (a rate too slow for ``LEAST_MEASURED`` requests to be
expected after the warm-up is run for longer). A rate meets the SLOs when the chosen percentile of
TTFT and of TPOT are within them and the requests finished while they arrived keep up with those
arriving (``BEHIND``: a deployment whose queue grows fails however short its run). The search
(``search``) doubles the first rate while it meets them, halves it while it does not, then bisects
between the highest rate that met them and the lowest that did not. A result the search could not
bracket says so: every rate up to ``most`` met them (at least ``most``), or none down to ``least`` did
(below ``least``). The runs of one search share their simulated steps.
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from memsim.core import collector, limits, progress
from memsim.core.atomic import atomic_write_text
from memsim.core.errors import ConfigError, MemsimWarning, run_field
from memsim.core.pages import lead, meanings
from memsim.hardware.loader import one_reading
from memsim.report.output import REPORT
from memsim.run.inputs import files
from memsim.run.runspec import check, param
from memsim.serving import report as serving_report
from memsim.serving.model import StepModel
from memsim.serving.report import BEHIND, PERCENTILES
from memsim.serving.serve import serve
from memsim.serving.spec import ServeSpec
from memsim.serving.summary import ServeSummary
from memsim.workload.requests import synthetic

CAPACITY = ("capacity",)
LEAST_MEASURED = 100  # requests expected after the warm-up: a slow rate's run is made longer to hold them
FOUND, AT_LEAST, BELOW = "found", "at least", "below"  # what a search's rate is: bracketed, or censored


def _cap(default: Any, help: str, **kw: Any) -> Any:
    return param(default, help, commands=CAPACITY, sweepable=False, **kw)


@dataclass(frozen=True, kw_only=True)
class CapacitySpec:
    """How a capacity search runs: each rate's run, the percentile judged, and the rates tried."""
    duration: float = _cap(60.0, "seconds of arrivals each rate is run for", kind=float, minimum=1e-3)
    warmup: float = _cap(10.0, "of those, the first seconds: served, not measured", kind=float, minimum=0)
    percentile: int = _cap(90, f"the TTFT and TPOT percentile held to the SLOs ({', '.join(map(str, PERCENTILES))})",
                           kind=int, minimum=1, maximum=99)
    start: float = _cap(1.0, "the first rate tried, requests a second", kind=float, minimum=1e-6)
    least: float = _cap(0.01, "the lowest rate tried: below it, the result is censored", kind=float, minimum=1e-6)
    most: float = _cap(1024.0, "the highest rate tried: every rate up to it meeting the SLOs reports at least it",
                       kind=float, minimum=1e-6)
    bisect: int = _cap(4, "bisections between the highest rate that met the SLOs and the lowest that did not",
                       kind=int, minimum=0, maximum=30)

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, check(f, getattr(self, f.name)))
        if self.percentile not in PERCENTILES:
            raise ConfigError(f"must be one of {', '.join(map(str, PERCENTILES))}", field=run_field("percentile"))
        if self.warmup >= self.duration:
            raise ConfigError(f"must be shorter than {run_field('duration')} ({self.duration:g} s): nothing would be "
                              "measured", field=run_field("warmup"))
        if not self.least <= self.start <= self.most:
            raise ConfigError(f"must lie from {run_field('least')} ({self.least:g}) to {run_field('most')} "
                              f"({self.most:g})", field=run_field("start"))


@dataclass(frozen=True, kw_only=True)
class Point:
    """One rate tried: what arrived and finished, the percentiles judged, and whether they met the SLOs."""
    rate: float  # requests a second drawn
    offered: float  # the draw's realisation over the measured requests
    served: float  # finished a second while they arrived
    requests: int  # measured
    ttft_s: float
    tpot_s: float
    met: bool
    why: str  # what it missed, in words ("" where it met everything)


# points.csv's columns (``Point``'s fields), and what each holds: docs/capacity.md is written from them.
POINT_COLUMNS = {
    "rate": "requests a second drawn at this point of the search",
    "offered": "the draw's realisation: the measured requests' arrivals over their spread",
    "served": "requests finished a second while the measured requests arrived (below `offered`: falling behind)",
    "requests": "requests measured (arrived after the warm-up)",
    "ttft_s": "time to first token at the percentile judged, seconds",
    "tpot_s": "time per output token at the percentile judged, seconds",
    "met": "whether the point met both SLOs and kept up with its arrivals",
    "why": "what it missed, in words (empty where it met everything)",
}


def reference() -> str:
    """docs/capacity.md: what ``memsim capacity`` does, capacity.json and points.csv, from the declarations."""
    head = lead(__doc__)
    rows = meanings(POINT_COLUMNS)
    options = "\n".join(f"| `--{f.name}` | `{f.default}` | {f.metadata['help']} |" for f in fields(CapacitySpec))
    return (f"# `memsim capacity`: capacity at an SLO\n\n<!-- generated by scripts/reference.py from "
            f"memsim/serving/capacity.py: do not edit -->\n\n{head}\n\n`memsim capacity` takes `memsim serve`'s "
            f"options for the deployment and its workload's shape (not its rate, count, trace or closed loop), the "
            f"SLOs (`--slo-ttft`, `--slo-tpot`) and the search's own:\n\n| option | default | meaning |\n|---|---|---|\n"
            f"{options}\n\nWith `--out DIR` it writes `capacity.json` (`capacity`: `rate`, `failed` (the lowest rate "
            f"that missed), `bound` (`{FOUND}`, `{AT_LEAST}` or `{BELOW}`), `text` and `points`; `slo`; `search`: the "
            f"options above; `at_capacity`: the serve.json of the run at the rate found, docs/serve-json.md) and "
            f"`points.csv`, a row for each rate tried in the order tried:\n\n{rows}\n\n"
            f"`memsim explain --serve` ranks the changes that would raise the capacity (docs/explain.md).\n")


def judge(rate: float, s: ServeSummary, percentile: int) -> Point:
    """A rate's run held to its own SLOs at ``percentile``."""
    ttft, tpot = getattr(s, f"ttft_s_p{percentile}"), getattr(s, f"tpot_s_p{percentile}")
    missed = [*([f"TTFT p{percentile} {ttft:.3g} s > {s.slo.ttft_s:g} s"] if ttft > s.slo.ttft_s else []),
              *([f"TPOT p{percentile} {tpot * 1e3:.3g} ms > {s.slo.tpot_s * 1e3:g} ms"] if tpot > s.slo.tpot_s else []),
              *([f"falls behind ({s.served_requests_per_s:.3g} of {s.offered_requests_per_s:.3g} req/s)"]
                if s.served_requests_per_s < BEHIND * s.offered_requests_per_s else [])]
    return Point(rate=rate, offered=s.offered_requests_per_s, served=s.served_requests_per_s, requests=s.requests,
                 ttft_s=ttft, tpot_s=tpot, met=not missed, why="; ".join(missed))


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """A search's answer: the highest rate that met the SLOs and the lowest that did not (``None``: none
    tried), ``bound`` saying whether the answer is bracketed or censored, and every rate tried in order."""
    rate: float  # 0 where none met them
    failed: float | None
    bound: str
    points: tuple[Point, ...]

    def text(self) -> str:
        """The answer in words, a censored one as such (``>= 1024 req/s``)."""
        if self.bound == AT_LEAST:
            return f">= {self.rate:.4g} req/s (every rate tried met the SLOs)"
        if self.bound == BELOW:
            return f"< {self.failed:.4g} req/s (no rate tried met the SLOs)"
        return f"{self.rate:.4g} req/s (meets the SLOs; {self.failed:.4g} req/s does not)"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def search(measure: Callable[[float], Point], start: float, least: float, most: float, bisect: int) -> Capacity:
    """The highest rate ``measure`` says meets the SLOs: ``start`` doubled while it meets them (to ``most``) or
    halved while it does not (to ``least``), then ``bisect`` bisections of the bracket."""
    points: list[Point] = []

    def tried(rate: float) -> Point:
        points.append(measure(rate))
        return points[-1]

    ok, bad = None, None
    rate = start
    while True:
        p = tried(rate)
        if p.met:
            ok = rate
            if bad is not None or rate >= most:
                break
            rate = min(2 * rate, most)
        else:
            bad = rate
            if ok is not None or rate <= least:
                break
            rate = max(rate / 2, least)
    if ok is None:
        return Capacity(rate=0.0, failed=bad, bound=BELOW, points=tuple(points))
    if bad is None:
        return Capacity(rate=ok, failed=None, bound=AT_LEAST, points=tuple(points))
    for _ in range(bisect):
        mid = (ok + bad) / 2
        if tried(mid).met:
            ok = mid
        else:
            bad = mid
    return Capacity(rate=ok, failed=bad, bound=FOUND, points=tuple(points))


def most_tries(cap: CapacitySpec) -> int:
    """The most rates a search of ``cap`` tries: a progress bar's length."""
    steps = max(math.log2(cap.most / cap.start), math.log2(cap.start / cap.least), 0.0)
    return math.ceil(steps) + 1 + cap.bisect


def measured(run: Callable[[float], ServeSummary], cap: CapacitySpec) -> tuple[Capacity, dict[float, ServeSummary]]:
    """Search with ``run`` serving each rate; returns the answer and each rate's summary."""
    summaries: dict[float, ServeSummary] = {}
    with progress.bar(most_tries(cap), "rate", "capacity") as shown:
        def measure(rate: float) -> Point:
            summaries[rate] = run(rate)
            shown.update()
            return judge(rate, summaries[rate], cap.percentile)

        found = search(measure, cap.start, cap.least, cap.most, cap.bisect)
    return found, summaries


@dataclass(frozen=True)
class CapacityResult:
    """A finished search on a deployment: the answer, the run at the rate found (``None``: none met the
    SLOs) and the warnings that run gave."""
    capacity: Capacity
    serve: ServeSpec  # the deployment and its workload's shape
    spec: CapacitySpec
    at: ServeSummary | None
    warned: tuple[str, ...] = ()
    inputs: tuple[Path, ...] = ()  # the files the runs read: ``write`` never writes over them

    def as_dict(self) -> dict[str, Any]:
        """capacity.json: the answer, the search and the run at the rate found."""
        slo = {"ttft_s": self.serve.slo_ttft, "tpot_s": self.serve.slo_tpot, "percentile": self.spec.percentile}
        return {"capacity": {**self.capacity.as_dict(), "text": self.capacity.text()}, "slo": slo,
                "search": asdict(self.spec), "at_capacity": self.at.as_dict() if self.at is not None else {}}

    def points(self) -> pd.DataFrame:
        """points.csv: a row for each rate tried, in the order tried."""
        return pd.DataFrame([asdict(p) for p in self.capacity.points])

    def write(self, out: Path) -> list[Path]:
        out = Path(out)
        check_out(out, self.inputs)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / name for name in FILES]
        atomic_write_text(paths[0], json.dumps(self.as_dict(), indent=2) + "\n")
        atomic_write_text(paths[1], self.points().to_csv(index=False))
        return paths


FILES = ("capacity.json", "points.csv")


def check_out(out: Path, inputs: tuple[Path, ...] = ()) -> None:
    """Refuse an ``--out`` holding anything a capacity search does not write, or one of its inputs."""
    serving_report.check_out(out, inputs, (*FILES, REPORT), "capacity search")


def find(spec: ServeSpec, cap: CapacitySpec) -> CapacityResult:
    """The capacity of ``spec``'s deployment for its workload's shape (its lengths, prefix, arrival process and
    seed; the rate is searched) at its SLOs."""
    if spec.users or spec.requests is not None:
        raise ConfigError("searches a rate of drawn arrivals: a closed loop or a trace has none",
                          field=run_field("users" if spec.users else "requests"))
    cache: dict = {}  # the simulated steps, shared by every rate
    with one_reading():
        model = StepModel.of(spec)  # the deployment loaded once: a rate changes none of it
    warned: dict[float, tuple[str, ...]] = {}

    def run(rate: float) -> ServeSummary:
        point = dataclasses.replace(spec, rate=rate, warmup=cap.warmup,
                                    duration=max(cap.duration, cap.warmup + LEAST_MEASURED / rate))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", MemsimWarning)
            with one_reading(), collector.deferred():
                summary = serve(point, synthetic(1, rate, **point.drawn()), steps_cache=cache, model=model).summary
        warned[rate] = tuple(str(w.message) for w in caught if issubclass(w.category, MemsimWarning))
        return summary

    most = min(cap.most, limits.MAX_OPS / cap.duration / 2)  # a run draws at most MAX_OPS requests
    if most < cap.least:
        raise ConfigError(f"{cap.duration:g} s of arrivals at {run_field('least')} {cap.least:g} a second would draw "
                          f"more requests than memsim serves in one run ({limits.MAX_OPS:,})", field=run_field("duration"))
    found, summaries = measured(run, dataclasses.replace(cap, most=most, start=min(cap.start, most)))
    at = summaries.get(found.rate)
    return CapacityResult(found, spec, cap, at, warned.get(found.rate, ()), files(spec))
