#!/usr/bin/env python3
"""The case study of "AI and Memory Wall" (Gholami et al.) on xeon-gold-6242.

    python scripts/memory_wall.py [--lengths 128 256 512 1024] [--out runs/memory_wall]

For BERT-Base and BERT-Large encoding N tokens and GPT-2 generating N tokens (batch 1) it
reports total FLOPs, memory operations (MOPs: bytes every operator reads and writes, as the
paper counts them, whatever the caches do), arithmetic intensity (FLOPs / MOPs) and the
simulated latency. It writes memory_wall.csv and memory_wall.png (matplotlib, the `plot` extra).
BERT's learned position table has 512 rows; for longer inputs it is extended, as the case
study needs. GPT-2 starts from one prompt token and generates the rest one step at a time.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pandas as pd

from memsim import simulate, simulate_graph, workload
from memsim.core.atomic import atomic_write_text

HW = "xeon-gold-6242"
ENCODERS = ("bert-base", "bert-large")
DECODER = "gpt2"


def mops(graph: workload.OpGraph) -> int:
    """Bytes every operator reads and writes (the paper's memory operations)."""
    return sum(r.bytes for op in graph for r in op.inputs) + sum(
        graph.tensors[t].bytes for op in graph for t in op.outputs)


def encoder_row(name: str, n: int) -> dict:
    model = workload.model_config(name)
    model = dataclasses.replace(model, max_positions=max(model.max_positions, n))
    graph = workload.build_step(model, workload.StepSpec.make("prefill", prompt=n))
    latency = simulate_graph(HW, graph).summary.step_time_s
    return {"model": name, "task": "encode", "tokens": n, "flops": graph.total_flops(), "mops": mops(graph),
            "latency_s": latency}


def decoder_row(n: int) -> dict:
    model = workload.model_config(DECODER)
    steps = [workload.build_step(model, workload.StepSpec.make("prefill", prompt=1))]
    steps += [workload.build_step(model, workload.StepSpec.make("decode", context=c)) for c in range(1, n)]
    run = simulate(HW, DECODER, phase="generate", prompt=1, generate=n - 1).summary
    return {"model": DECODER, "task": "generate", "tokens": n, "flops": sum(g.total_flops() for g in steps),
            "mops": sum(mops(g) for g in steps), "latency_s": run.total_s}


def case_study(lengths: list[int]) -> pd.DataFrame:
    rows = [encoder_row(name, n) for name in ENCODERS for n in lengths] + [decoder_row(n) for n in lengths]
    df = pd.DataFrame(rows)
    df["arithmetic_intensity"] = df["flops"] / df["mops"]
    return df


def plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    for ax, (col, label) in zip(axes, [("flops", "FLOPs"), ("mops", "MOPs (bytes)"),
                                       ("arithmetic_intensity", "arithmetic intensity (FLOP/B)"),
                                       ("latency_s", "latency (s)")]):
        for model, part in df.groupby("model", sort=False):
            ax.plot(part["tokens"], part[col], marker="o", label=model)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens (N)")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"AI and Memory Wall case study on {HW} (memsim)")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--out", type=Path, default=Path("runs/memory_wall"))
    args = ap.parse_args()
    df = case_study(args.lengths)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "memory_wall.csv", df.to_csv(index=False))
    pd.set_option("display.width", 140)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    try:
        plot(df, args.out / "memory_wall.png")
    except ImportError:
        print("matplotlib is not installed (pip install '.[plot]'): figure skipped", file=sys.stderr)
    print(f"wrote {args.out / 'memory_wall.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
