"""The requests a serving run is given: each its arrival time, prompt and output tokens, and an
optional shared prefix. From a CSV trace (``read_requests``) or drawn (``synthetic``): Poisson or
bursty (gamma) arrivals at a rate, prompt and output lengths fixed, uniform or lognormal, from a
seed, so the same seed gives the same requests.

Trace schema (CSV, a header row, one request a row; ``COLUMNS``): ``arrival_s`` (seconds, not
before 0, in order, within memsim's horizon), ``prompt_tokens`` (1 to ``MAX_TOKENS``),
``output_tokens`` (1 to ``MAX_TOKENS``), and optionally ``prefix_id`` (text) with ``prefix_tokens``
(the first that many prompt tokens are shared by every request of that id). A bad row is one line
naming the file, the row and the column; a repeated column, a row with more cells than the header
and a cell past the CSV reader's limit are refused the same way. The drawn requests obey the same
rules: a median length outside them, a prefix longer than the median prompt, a negative seed or
arrivals past the horizon are refused, never clamped.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memsim.core import limits
from memsim.core.errors import ConfigError, run_field
from memsim.core.files import read_text
from memsim.core.units import PS_PER_S

COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "prefix_id", "prefix_tokens")
REQUIRED = COLUMNS[:3]
# What ``memsim serve`` writes beside these in its requests.csv (a request's number and outcome: the
# engine's ``Sequence.row``): read back and left aside, so a run's requests.csv serves again as a trace.
WRITTEN = ("id", "queue_s", "ttft_s", "tpot_s", "e2e_s", "itl_s_max", "preemptions", "handoff_s", "instance")
ARRIVALS = ("poisson", "gamma")
LENGTHS = ("fixed", "uniform", "lognormal")
MAX_TOKENS = 1 << 20  # a request's prompt or output
HORIZON_S = 2**63 / PS_PER_S  # memsim's integer picoseconds reach 107 days: no request arrives later
BURSTINESS = (0.01, 100.0)  # gamma gaps' coefficient of variation: beyond these, gaps underflow to 0 or overflow


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    id: int
    arrival_s: float
    prompt: int
    output: int
    prefix_id: str = ""
    prefix: int = 0  # leading prompt tokens shared with every request of ``prefix_id``

    def __post_init__(self) -> None:
        where = f"requests[{self.id}]"
        if not (math.isfinite(self.arrival_s) and 0 <= self.arrival_s < HORIZON_S):
            raise ConfigError(f"arrival {self.arrival_s!r} s must be a time from 0 to memsim's horizon "
                              f"({HORIZON_S:.4g} s)", field=where)
        check_tokens("prompt_tokens", self.prompt, where)
        check_tokens("output_tokens", self.output, where)
        check_prefix(self.prefix, self.prompt, where)
        if self.prefix and not self.prefix_id:
            raise ConfigError(f"prefix_tokens {self.prefix} needs a prefix_id", field=where)


def check_tokens(name: str, value: int, field: str) -> None:
    """A prompt's or an output's tokens, on every path (a trace's row, a drawn median)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_TOKENS:
        raise ConfigError(f"{name} {value!r} must be a whole number from 1 to {MAX_TOKENS}", field=field)


def check_prefix(prefix: int, prompt: int, field: str) -> None:
    """A shared prefix is part of its prompt: 0 to the prompt's tokens."""
    if isinstance(prefix, bool) or not isinstance(prefix, (int, np.integer)) or not 0 <= prefix <= prompt:
        raise ConfigError(f"prefix_tokens {prefix!r} must be a whole number from 0 to the prompt ({prompt})",
                          field=field)


def read_requests(path: Path) -> tuple[Request, ...]:
    """The requests of a CSV trace, checked row by row (see the module)."""
    file = str(path)
    reader = csv.DictReader(io.StringIO(read_text(Path(path))))
    try:
        return _read(reader, file)
    except csv.Error as exc:  # a cell past the reader's limit, a stray quote
        raise ConfigError(f"not a CSV the reader can take: {exc}", file=file, field=f"row {reader.line_num + 1}") from None


def _read(reader: csv.DictReader, file: str) -> tuple[Request, ...]:
    header = reader.fieldnames or []
    repeated = next((c for i, c in enumerate(header) if c in header[:i]), None)
    if repeated is not None:
        raise ConfigError(f"column {repeated!r} is repeated", file=file, field="header")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ConfigError(f"missing column {missing[0]!r} (columns: {', '.join(COLUMNS)})", file=file, field="header")
    unknown = [c for c in header if c not in COLUMNS and c not in WRITTEN]
    if unknown:
        raise ConfigError(f"unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)}; and those memsim serve "
                          "writes beside them, left aside)", file=file, field="header")
    out: list[Request] = []
    for i, row in enumerate(reader):
        limits.check(i + 1, limits.MAX_OPS, "requests", "rows", file)
        where = f"row {i + 2}"  # the header is row 1
        if None in row:  # DictReader keeps the cells past the header's under None
            raise ConfigError(f"has {len(row[None])} more cells than the header's {len(header)} columns", file=file,
                              field=where)
        try:
            request = Request(id=i, arrival_s=float(_number(row, "arrival_s", float, file, where)),
                              prompt=int(_number(row, "prompt_tokens", int, file, where)),
                              output=int(_number(row, "output_tokens", int, file, where)),
                              prefix_id=(row.get("prefix_id") or "").strip(),
                              prefix=int(_number(row, "prefix_tokens", int, file, where))
                              if (row.get("prefix_tokens") or "").strip() else 0)
        except ConfigError as exc:
            if exc.file:
                raise
            raise ConfigError(exc.message, file=file, field=where) from None
        if out and request.arrival_s < out[-1].arrival_s:
            raise ConfigError(f"arrival_s {request.arrival_s:g} is before the row above's: rows go in arrival order",
                              file=file, field=where)
        out.append(request)
    if not out:
        raise ConfigError("holds no requests", file=file, field="rows")
    return tuple(out)


def requests_csv(requests: tuple[Request, ...]) -> str:
    """``requests`` as a trace (``COLUMNS``) that ``read_requests`` reads back to the same requests."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in requests:
        writer.writerow([repr(r.arrival_s), r.prompt, r.output, r.prefix_id, r.prefix if r.prefix_id else ""])
    return out.getvalue()


def _number(row: dict, column: str, kind: type, file: str, where: str) -> int | float:
    text = (row.get(column) or "").strip()
    try:
        return float(text) if kind is float else int(text, 10)
    except ValueError:
        raise ConfigError(f"{column}: {text!r} is not {'a number' if kind is float else 'a whole number'}",
                          file=file, field=where) from None


def _lengths(rng: np.random.Generator, kind: str, median: int, spread: float, n: int) -> np.ndarray:
    """``n`` token counts: ``fixed`` at ``median``; ``uniform`` on [median (1 - spread), median (1 + spread)];
    ``lognormal`` with that median and sigma ``spread``; at least 1."""
    if kind == "fixed":
        values = np.full(n, float(median))
    elif kind == "uniform":
        values = rng.uniform(median * (1 - spread), median * (1 + spread), n)
    elif kind == "lognormal":
        values = rng.lognormal(math.log(median), spread, n)
    else:
        raise ConfigError(f"unknown length distribution {kind!r} ({', '.join(LENGTHS)})", field=run_field("lengths"))
    return np.clip(np.rint(values), 1, MAX_TOKENS).astype(int)


def _gaps(rng: np.random.Generator, arrival: str, burstiness: float, rate: float, n: int) -> np.ndarray:
    """``n`` gaps between arrivals at ``rate``: exponential, or gamma of coefficient of variation ``burstiness``."""
    if arrival == "poisson":
        return rng.exponential(1 / rate, n)
    shape = 1 / burstiness ** 2  # gamma gaps of mean 1/rate and coefficient of variation ``burstiness``
    return rng.gamma(shape, 1 / (rate * shape), n)


def _arrivals(rng: np.random.Generator, arrival: str, burstiness: float, rate: float, n: int,
              duration: float | None) -> np.ndarray:
    """``n`` arrival times from 0, or with a ``duration`` all that arrive before it (drawn in batches of
    the expected count until they pass it); past ``MAX_OPS`` requests a one-line error."""
    if duration is None:
        gaps = _gaps(rng, arrival, burstiness, rate, n)
        return np.cumsum(gaps) - gaps[0]  # the first request arrives at 0
    if rate * duration > limits.MAX_OPS:
        raise ConfigError(f"{rate * duration:,.0f} requests would arrive in {duration:g} s at {rate:g} a second: more "
                          f"than memsim serves in one run ({limits.MAX_OPS:,})", field=run_field("duration"))
    batch = min(limits.MAX_OPS, math.ceil(rate * duration) + 16)
    gaps = _gaps(rng, arrival, burstiness, rate, batch)
    while gaps[1:].sum() < duration and len(gaps) <= limits.MAX_OPS:
        gaps = np.concatenate([gaps, _gaps(rng, arrival, burstiness, rate, batch)])
    arrivals = np.cumsum(gaps) - gaps[0]
    n = int(np.searchsorted(arrivals, duration))
    if n > limits.MAX_OPS:
        raise ConfigError(f"more than {limits.MAX_OPS:,} requests arrive in {duration:g} s at {rate:g} a second "
                          "(bursts): more than memsim serves in one run", field=run_field("duration"))
    return arrivals[:n]


def synthetic(n: int, rate: float, *, arrival: str = "poisson", burstiness: float = 1.0, prompt: int = 512,
              output: int = 128, lengths: str = "fixed", spread: float = 0.5, seed: int = 0,
              prefix: int = 0, duration: float | None = None) -> tuple[Request, ...]:
    """``n`` requests arriving at ``rate`` a second (with a ``duration``: every request that arrives in that
    many seconds, however many): ``poisson`` (exponential gaps) or ``gamma`` (gaps of coefficient of variation
    ``burstiness``: above 1 bursty); lengths drawn by ``lengths`` around ``prompt`` and ``output``; with
    ``prefix`` > 0 every request shares its first ``prefix`` prompt tokens (a drawn prompt shorter than the
    prefix is the prefix: the prefix is part of every prompt)."""
    if not (math.isfinite(rate) and rate > 0):
        raise ConfigError("must be a positive rate (requests a second)", field=run_field("rate"))
    if duration is not None:
        if not (math.isfinite(duration) and 0 < duration < HORIZON_S):
            raise ConfigError(f"must be a positive time within memsim's horizon ({HORIZON_S:.4g} s)",
                              field=run_field("duration"))
    elif not 1 <= n <= limits.MAX_OPS:
        raise ConfigError(f"must be 1 to {limits.MAX_OPS:,}", field=run_field("count"))
    if arrival not in ARRIVALS:
        raise ConfigError(f"unknown arrival process {arrival!r} ({', '.join(ARRIVALS)})", field=run_field("arrival"))
    if not (math.isfinite(burstiness) and BURSTINESS[0] <= burstiness <= BURSTINESS[1]):
        raise ConfigError(f"must be a coefficient of variation from {BURSTINESS[0]:g} to {BURSTINESS[1]:g}",
                          field=run_field("burstiness"))
    if not (math.isfinite(spread) and 0 <= spread < 5):
        raise ConfigError("must be from 0 to below 5", field=run_field("spread"))
    check_tokens("prompt_tokens", prompt, run_field("prompt"))
    check_tokens("output_tokens", output, run_field("output_tokens"))
    check_prefix(prefix, prompt, run_field("prefix"))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"must be a whole number from 0, not {seed!r}", field=run_field("seed"))
    rng = np.random.default_rng(seed)
    arrivals = _arrivals(rng, arrival, burstiness, rate, n, duration)
    n = len(arrivals)
    if not arrivals[-1] < HORIZON_S:
        raise ConfigError(f"{n:,} requests at {rate:g} a second arrive past memsim's horizon ({HORIZON_S:.4g} s)",
                          field=run_field("rate"))
    prompts = np.maximum(_lengths(rng, lengths, prompt, spread, n), max(prefix, 1))  # a drawn prompt holds the prefix
    outputs = _lengths(rng, lengths, output, spread, n)
    return tuple(Request(id=i, arrival_s=float(arrivals[i]), prompt=int(prompts[i]), output=int(outputs[i]),
                         prefix_id="prefix" if prefix else "", prefix=prefix) for i in range(n))
