"""The example request trace, traces/requests-example.csv: what ``memsim serve --requests`` reads (and
docs/serving.md runs), drawn by memsim's own generator so anyone can draw it again; ``--write``
rewrites it, and tests/workload/test_requests_example.py keeps it current.

Its requests: 60 of them arriving in bursts (gamma gaps of coefficient of variation 2) at 4 a
second, prompts and outputs of lognormal lengths around 512 and 128 tokens, and a system prompt of
64 tokens every request shares (a prefix the cache keeps once)."""
from __future__ import annotations

import argparse
from pathlib import Path

from memsim.workload.requests import requests_csv, synthetic

PATH = Path(__file__).resolve().parents[1] / "traces" / "requests-example.csv"
EXAMPLE = {"n": 60, "rate": 4.0, "arrival": "gamma", "burstiness": 2.0, "prompt": 512, "output": 128,
           "lengths": "lognormal", "spread": 0.5, "seed": 0, "prefix": 64}


def text() -> str:
    """The trace as the file holds it."""
    n, rate = EXAMPLE["n"], EXAMPLE["rate"]
    return requests_csv(synthetic(n, rate, **{k: v for k, v in EXAMPLE.items() if k not in ("n", "rate")}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite traces/requests-example.csv")
    if parser.parse_args().write:
        PATH.write_text(text())
        print(f"wrote {PATH}")
    else:
        print(text(), end="")
