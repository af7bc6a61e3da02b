"""What ``serve.json`` holds, declared once: every key of a serving run's summary is a field of
``ServeSummary``, with its unit and what it means, its nested parts typed records of their own
(``Slo``, ``KvUse``, ``Handoff``, ``Surrogate``, ``Limit``, ``Served``, ``HostAdded``). It is built by
keyword in one place (``memsim.serving.serve.serve``), stays an object (``ServeResult.summary``) and is
made a mapping only where it is written (``as_dict``: serve.json, a sweep's row), in the declared
order. The reference page (``docs/serve-json.md``) is generated from these fields (``reference``), so a
key is added in one place.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


def serve_field(unit: str, help: str) -> Any:
    """A serve.json key in ``unit`` (``s``, ``J``, ``W``, ``1`` for a ratio or a count, ``1/s`` for a rate,
    ``text``, ``bool`` or ``object`` for a nested one), meaning ``help``."""
    return field(metadata={"unit": unit, "help": help})


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """The SLOs goodput counts against."""
    ttft_s: float
    tpot_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class KvUse:
    """One instance's KV cache and its use over the run."""
    blocks: int
    mean_utilization: float  # while busy
    peak_blocks: int
    block_tokens: int
    bytes_per_token: int  # one rank's
    levels: dict[str, int]  # the bytes each level gives it
    fill: dict[str, int]  # the blocks each level holds, filled in order
    host: str  # the host level a preempted sequence may be swapped to
    host_blocks: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Handoff:
    """Disaggregated serving: the KV caches sent from prefill to decode instances."""
    mean_s: float
    energy_j: float
    total_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Surrogate:
    """The step times: grid points simulated, and the interpolation's error on sampled steps."""
    grid_steps: int
    sampled: int
    max_error: float
    mean_error: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Limit:
    """What limits the run."""
    by: str  # the KV cache's capacity, or the resource bounding the commonest step
    kv_full_fraction: float
    step: str  # the commonest step's shape
    step_bound: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    """The deployment the run served on."""
    hw: str
    model: str
    tp: int
    pp: int
    replicas: int
    prefill: int
    decode: int
    layout: str  # in words
    stack: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HostAdded:
    """The stack's host work added to the steps."""
    busy_s: float
    busy_fraction: float
    frontend_s: float  # a request
    overlap: str
    multi_step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSummary:
    requests: int = serve_field("1", "requests measured: served, and arrived after the warm-up")
    warmup_s: float = serve_field("s", "the warm-up: requests that arrive this long after the first are measured")
    warmup_requests: int = serve_field("1", "requests that arrived in the warm-up: served, and left out of every "
                                       "figure")
    span_s: float = serve_field("s", "from the first measured arrival to the last measured request's last token")
    requests_per_s: float = serve_field("1/s", "requests measured over the span (the drain after the last arrival "
                                        "included: below the offered rate)")
    offered_requests_per_s: float = serve_field("1/s", "requests a second sent: the measured requests' arrivals over "
                                                "their spread (a drawn rate's realisation, a trace's, a closed loop's)")
    served_requests_per_s: float = serve_field("1/s", "requests finished a second while the measured requests "
                                               "arrived: below `offered_requests_per_s`, the deployment falls "
                                               "behind and its queue grows")
    output_tokens_per_s: float = serve_field("1/s", "output tokens a second over the span")
    ttft_s_p50: float = serve_field("s", "time to first token (arrival to first output token), 50th percentile")
    ttft_s_p90: float = serve_field("s", "time to first token, 90th percentile")
    ttft_s_p99: float = serve_field("s", "time to first token, 99th percentile")
    tpot_s_p50: float = serve_field("s", "time per output token after the first, 50th percentile")
    tpot_s_p90: float = serve_field("s", "time per output token, 90th percentile")
    tpot_s_p99: float = serve_field("s", "time per output token, 99th percentile")
    itl_s_p50: float = serve_field("s", "inter-token latency: the gap between an output token and the one before, "
                                   "over every gap of the measured requests, 50th percentile")
    itl_s_p90: float = serve_field("s", "inter-token latency, 90th percentile")
    itl_s_p99: float = serve_field("s", "inter-token latency, 99th percentile (a stall behind a prefill, a "
                                   "preemption)")
    e2e_s_p50: float = serve_field("s", "arrival to last token, 50th percentile")
    e2e_s_p90: float = serve_field("s", "arrival to last token, 90th percentile")
    e2e_s_p99: float = serve_field("s", "arrival to last token, 99th percentile")
    queue_s_p50: float = serve_field("s", "arrival to admission, 50th percentile")
    queue_s_p90: float = serve_field("s", "arrival to admission, 90th percentile")
    queue_s_p99: float = serve_field("s", "arrival to admission, 99th percentile")
    ttft_s_mean: float = serve_field("s", "time to first token, mean")
    tpot_s_mean: float = serve_field("s", "time per output token, mean")
    e2e_s_mean: float = serve_field("s", "arrival to last token, mean")
    itl_s_mean: float = serve_field("s", "inter-token latency, mean")
    goodput_requests_per_s: float = serve_field("1/s", "requests a second that met both SLOs (`slo`)")
    slo: Slo = serve_field("object", "the SLOs goodput counts against: `ttft_s`, `tpot_s`")
    busy_fraction: float = serve_field("1", "share of the span some instance was computing a step")
    preemptions: int = serve_field("1", "sequences preempted (recomputed or swapped) over the run")
    swapped_blocks: int = serve_field("1", "KV blocks swapped out to the host level over the run")
    kv: KvUse = serve_field("object", "one instance's KV cache: `blocks`, `mean_utilization` (while busy), "
                           "`peak_blocks`, `block_tokens`, `bytes_per_token` (one rank's), `levels` and `fill` "
                           "(blocks in each level), `host` and `host_blocks` (swap room)")
    energy_j: float = serve_field("J", "energy of every step and of the KV caches handed between instances")
    energy_per_token_j: float = serve_field("J", "`energy_j` over the output tokens")
    avg_power_w: float = serve_field("W", "`energy_j` over the span")
    steps: int = serve_field("1", "steps the instances computed")
    handoff: Handoff = serve_field("object", "disaggregated serving: `mean_s` a KV cache took to reach its decode "
                                "instance, `energy_j` of the transfers, `total_s`")
    mean_in_system: float = serve_field("1", "requests in the system on average (the time integral over the span)")
    surrogate: Surrogate = serve_field("object", "the step times: `grid_steps` simulated, and on `sampled` steps "
                                  "simulated in full the interpolation's `max_error` and `mean_error`")
    limit: Limit | None = serve_field("object", "what limits the run: `by` (the KV cache's capacity, or the "
                                      "resource bounding its commonest step), `kv_full_fraction`, `step`, "
                                      "`step_bound` (empty where no step ran)")
    deployment: Served = serve_field("object", "`hw`, `model`, `tp`, `pp`, `replicas`, `prefill`, `decode` "
                                   "(instances), `layout` (in words) and `stack`")
    host: HostAdded = serve_field("object", "the stack's host work added to the steps: `busy_s`, "
                                    "`busy_fraction`, `frontend_s` (a request), `overlap`, `multi_step`")
    scheduler: str = serve_field("text", "the scheduler that batched the steps")
    prefix_caching: bool = serve_field("bool", "whether a shared prefix's KV blocks were cached")
    preemption: str = serve_field("text", "recompute or swap")
    users: int = serve_field("1", "closed-loop clients (0: an open loop)")

    def as_dict(self) -> dict[str, Any]:
        """The summary as serve.json writes it, in the declared order (a run with no step has no limit: ``{}``)."""
        written = asdict(self)
        written["limit"] = written["limit"] or {}
        return written


def reference() -> str:
    """``docs/serve-json.md``: every key of serve.json, from the declaration."""
    rows = ["# serve.json", "",
            "Generated from `memsim/serving/summary.py` by `python scripts/reference.py --write`; "
            "`tests/test_docs.py` keeps it current. `memsim serve --out DIR` writes it beside requests.csv and "
            "steps.csv; `memsim.serve(...).summary` is the same summary as a typed object (`ServeSummary`, its nested "
            "parts records of their own; `.as_dict()` gives this mapping).", "",
            "| key | unit | meaning |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {f.metadata['unit']} | {f.metadata['help']} |" for f in fields(ServeSummary)]
    return "\n".join(rows) + "\n"
