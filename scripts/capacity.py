"""Capacity at an SLO: the requests a second each chip serves Llama-3.1-8B at, keeping the p90 time to
first token under the SLO, and what limits it (docs/serving.md's worked study).

    python scripts/capacity.py

Each chip serves the same Poisson workload (``WORKLOAD``) for ``SECONDS`` of arrivals (at least ``LEAST``
requests, so that the queue reaches its steady state at every rate), at rates doubling from 1 request a
second until the p90 TTFT passes the SLO, then bisected ``BISECT`` times between the last rate that met it
and the first that did not. The limit is the run's own (``serve.json``'s ``limit``) at the highest rate
that met it. The runs of one chip share their simulated steps.
"""
from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor

CHIPS = ("h100-sxm", "h200-sxm", "wse-3")
MODEL = "llama-3.1-8b"
SLO_S = 0.5  # p90 time to first token
WORKLOAD = {"prompt": 1024, "output_tokens": 256, "seed": 11}
SECONDS = 20.0
LEAST = 200
BISECT = 3
MOST = 512.0  # requests a second: the search stops here


def serve(hw: str, rate: float, cache: dict) -> dict:
    from memsim.serving.serve import serve
    from memsim.serving.spec import ServeSpec
    from memsim.workload.requests import synthetic

    spec = ServeSpec(hw=hw, model=MODEL, check=0, **WORKLOAD)  # the requests drawn as memsim serve draws them
    requests = synthetic(max(LEAST, round(rate * SECONDS)), rate, **spec.drawn())
    return serve(spec, requests, steps_cache=cache).summary.as_dict()


def capacity(hw: str) -> dict:
    """The highest rate found whose p90 TTFT meets the SLO, and that run's summary."""
    rate, best, fail, cache = 1.0, None, None, {}
    while rate <= MOST:
        s = serve(hw, rate, cache)
        if s["ttft_s_p90"] > SLO_S:
            fail = rate
            break
        best = (rate, s)
        rate *= 2
    if best is None:
        return {"hw": hw, "rate": 0.0, "summary": None}
    lo, hi = best[0], fail
    for _ in range(BISECT if hi is not None else 0):
        mid = (lo + hi) / 2
        s = serve(hw, mid, cache)
        if s["ttft_s_p90"] <= SLO_S:
            lo, best = mid, (mid, s)
        else:
            hi = mid
    return {"hw": hw, "rate": best[0], "summary": best[1]}


def study() -> list[dict]:
    with ProcessPoolExecutor() as pool:
        return list(pool.map(capacity, CHIPS))


def markdown(rows: list[dict]) -> str:
    lines = [f"| chip | requests/s at p90 TTFT <= {SLO_S:g} s | output tokens/s | p90 TPOT | KV cache | limited by |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        s = r["summary"]
        kv = s["kv"]
        where = ", ".join(kv["levels"])
        lines.append(f"| {r['hw']} | {r['rate']:.3g} | {s['output_tokens_per_s']:,.0f} | {s['tpot_s_p90'] * 1e3:.3g} ms | "
                     f"{kv['blocks'] * kv['block_tokens'] * kv['bytes_per_token'] / 1e9:.1f} GB in {where} | "
                     f"{s['limit']['by']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown(study()) + "\n")
