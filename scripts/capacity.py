"""Capacity at an SLO: the requests a second each chip serves Llama-3.1-8B at, keeping the p90 time to
first token within 0.5 s and the p90 time per output token within 100 ms, and what limits it
(docs/serving.md's worked study).

    python scripts/capacity.py

Each chip runs ``memsim capacity``'s search (``memsim.serving.capacity.find``): the same Poisson
workload (``WORKLOAD``), each rate run for ``SEARCH.duration`` seconds of arrivals with the first
``SEARCH.warmup`` seconds left out, at rates doubling from 1 request a second until one misses the SLOs
(or falls behind its arrivals), then bisected ``SEARCH.bisect`` times. The limit is the run's own
(``serve.json``'s ``limit``) at the rate found. The command line gives the same answer:

    memsim capacity --hw h100-sxm --model llama-3.1-8b --prompt 1024 --output-tokens 256 --seed 11 \\
        --slo-ttft 0.5 --duration 30 --warmup 5 --bisect 3
"""
from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor

CHIPS = ("h100-sxm", "h200-sxm", "wse-3")
MODEL = "llama-3.1-8b"
SLO_TTFT_S = 0.5
WORKLOAD = {"prompt": 1024, "output_tokens": 256, "seed": 11}
SEARCH = {"duration": 30.0, "warmup": 5.0, "bisect": 3}


def capacity(hw: str) -> dict:
    """The capacity found on ``hw``, its bound, and the summary of the run at it."""
    from memsim.serving.capacity import CapacitySpec, find
    from memsim.serving.spec import ServeSpec

    result = find(ServeSpec(hw=hw, model=MODEL, slo_ttft=SLO_TTFT_S, check=0, **WORKLOAD), CapacitySpec(**SEARCH))
    return {"hw": hw, "rate": result.capacity.rate, "bound": result.capacity.bound,
            "summary": result.at.as_dict() if result.at is not None else None}


def study() -> list[dict]:
    with ProcessPoolExecutor() as pool:
        return list(pool.map(capacity, CHIPS))


def markdown(rows: list[dict]) -> str:
    lines = ["| chip | requests/s within the SLOs | output tokens/s | p90 TTFT | p90 TPOT | KV cache | limited by |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["summary"]
        kv = s["kv"]
        where = ", ".join(kv["levels"])
        said = {"at least": ">= ", "below": "< "}.get(r["bound"], "")
        lines.append(f"| {r['hw']} | {said}{r['rate']:.3g} | {s['output_tokens_per_s']:,.0f} | "
                     f"{s['ttft_s_p90'] * 1e3:.3g} ms | {s['tpot_s_p90'] * 1e3:.3g} ms | "
                     f"{kv['blocks'] * kv['block_tokens'] * kv['bytes_per_token'] / 1e9:.1f} GB in {where} | "
                     f"{s['limit']['by']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown(study()) + "\n")
