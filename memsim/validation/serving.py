"""A published serving experiment reproduced: TensorRT-LLM's offline throughput of Llama-3.1-8B (FP8
weights) on one H100 and one H200 (``data/serving.csv``, from its performance overview): every request
of fixed input and output lengths sent at once, the output tokens a second over the run.

memsim serves the same requests (all arriving at 0) with the ``chunked`` scheduler, which mixes prompts
with decodes in each step as TensorRT-LLM's in-flight batching does, under TensorRT-LLM's default limits
(``MAX_SEQS`` sequences and ``MAX_TOKENS`` tokens a step). The page does not say whether the KV cache
was FP8: each row is run with a bf16 and an FP8 KV cache, and both errors are reported. Nothing here is
fitted to these rows.
"""
from __future__ import annotations

import csv
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from memsim.serving.serve import serve
from memsim.serving.spec import ServeSpec
from memsim.workload.requests import Request

DATA = Path(__file__).with_name("data") / "serving.csv"
MAX_SEQS = 2048  # TensorRT-LLM's BuildConfig default max_batch_size
MAX_TOKENS = 8192  # and max_num_tokens
KV_DTYPES = ("bf16", "fp8")


@dataclass(frozen=True, kw_only=True)
class Row:
    hw: str
    input_tokens: int
    output_tokens: int
    requests: int
    measured: float  # output tokens a second
    predicted: dict[str, float]  # by KV-cache dtype

    def error(self, kv: str) -> float:
        return self.predicted[kv] / self.measured - 1


def load(path: Path = DATA) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


HARNESS = Path(__file__).resolve().parent / "data" / "stacks" / "trtllm-bench.yaml"  # the stack it measured


def predict(hw: str, isl: int, osl: int, n: int, kv: str, cache: dict | None = None) -> float:
    """memsim's output tokens a second for ``n`` requests of ``isl`` in, ``osl`` out, all at once (``cache``: the
    steps simulated for earlier rows of the same chip and KV dtype)."""
    reqs = tuple(Request(id=i, arrival_s=0.0, prompt=isl, output=osl) for i in range(n))
    spec = ServeSpec(hw=hw, model="llama-3.1-8b", weight_dtype="fp8", kv_dtype=kv, stack=str(HARNESS),
                     scheduler="chunked", max_seqs=MAX_SEQS, max_tokens=MAX_TOKENS, check=0)
    result = serve(spec, reqs, steps_cache=cache)
    return float(result.summary.output_tokens_per_s)


def _predict_all(group: tuple[str, str, tuple]) -> list[float]:
    """The rows of one chip and KV dtype, in one process, sharing their simulated steps."""
    hw, kv, shapes = group
    cache: dict = {}
    return [predict(hw, isl, osl, n, kv, cache) for isl, osl, n in shapes]


def rows(workers: int | None = None) -> list[Row]:
    """Every row, each chip and KV dtype on its own process (``workers``, default: every core)."""
    data = load()
    groups = [(hw, kv, tuple((int(r["input_tokens"]), int(r["output_tokens"]), int(r["requests"]))
                             for r in data if r["hw"] == hw)) for hw in dict.fromkeys(r["hw"] for r in data)
              for kv in KV_DTYPES]
    with ProcessPoolExecutor(workers) as pool:
        found = dict(zip(((hw, kv) for hw, kv, _ in groups), pool.map(_predict_all, groups)))
    out: list[Row] = []
    for r in data:  # each chip's rows come back in their order
        k = sum(x.hw == r["hw"] for x in out)
        out.append(Row(hw=r["hw"], input_tokens=int(r["input_tokens"]), output_tokens=int(r["output_tokens"]),
                       requests=int(r["requests"]), measured=float(r["output_tokens_per_s"]),
                       predicted={kv: found[r["hw"], kv][k] for kv in KV_DTYPES}))
    return out


def markdown(found: list[Row]) -> str:
    lines = ["| chip | in / out | requests | measured tok/s | memsim, KV bf16 | error | memsim, KV fp8 | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in found:
        lines.append(f"| {r.hw} | {r.input_tokens} / {r.output_tokens} | {r.requests:,} | {r.measured:,.0f} | "
                     f"{r.predicted['bf16']:,.0f} | {r.error('bf16'):+.1%} | {r.predicted['fp8']:,.0f} | "
                     f"{r.error('fp8'):+.1%} |")
    for kv in KV_DTYPES:
        errors = sorted(abs(r.error(kv)) for r in found)
        lines.append("")
        lines.append(f"KV {kv}: median |error| {errors[len(errors) // 2]:.1%}, max {errors[-1]:.1%} over "
                     f"{len(errors)} rows.")
    return "\n".join(lines)
