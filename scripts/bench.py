#!/usr/bin/env python3
"""Benchmarks: prints figures, asserts nothing. Run: python scripts/bench.py [--repeat N]

- wall time of one Llama-2-7B decode step on h100-sxm (whole pipeline and engine alone),
  simulated events and events per second;
- event count against the number of layers (should grow linearly);
- wall time of a Llama-2-7B prefill step (4096 tokens);
- wall time of the Llama-3.1-70B and Llama-3.1-405B decode steps at TP 8;
- wall time of a 2048-token Llama-2-70B generation at batch 64, on one chip and on 4 (TP 4);
- wall time of a 100-point sweep of a decode step on a 2-worker local pool.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from memsim import engine, hardware, mapping, simulate, workload


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    chip = hardware.load("h100-sxm")
    model = workload.model_config("llama-2-7b")
    step = workload.StepSpec.make("decode", batch=1, context=2048)

    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-7b", phase="decode", context=2048), args.repeat)
    graph = workload.build_step(model, step)
    plan = mapping.make_plan(graph, chip)
    eng_wall, eng = timed(lambda: engine.run(plan), args.repeat)
    print("Llama-2-7B decode, batch 1, context 2048, h100-sxm")
    print(f"  simulated step time        {result.summary['step_time_s'] * 1e3:10.3f} ms")
    print(f"  wall time, simulate()      {wall:10.3f} s   (config, DAG, mapping, engine, tables)")
    print(f"  wall time, engine only     {eng_wall:10.3f} s")
    print(f"  events                     {eng.events:10d}")
    print(f"  events per second          {eng.events / eng_wall:10.0f}")
    print(f"  ops simulated / replayed   {eng.simulated_tasks:5d} / {eng.replayed_tasks}")

    print("Event count against layers (Llama-2-7B shapes, decode)")
    counts = []
    for layers in (8, 16, 32, 64):
        g = workload.build_step(replace(model, layers=layers), step)
        r = engine.run(mapping.make_plan(g, chip))
        counts.append((layers, r.events))
        print(f"  {layers:3d} layers  {r.events:8d} events  {r.events / layers:8.1f} per layer")
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(counts, counts[1:])]
    print(f"  marginal events per layer: {', '.join(f'{s:.1f}' for s in slopes)} (constant = linear)")

    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-7b", phase="prefill", prompt=4096),
                         max(1, args.repeat // 2))
    print("Llama-2-7B prefill, 4096 tokens, h100-sxm")
    print(f"  simulated step time        {result.summary['step_time_s'] * 1e3:10.3f} ms")
    print(f"  wall time, simulate()      {wall:10.3f} s")

    for model in ("llama-3.1-70b", "llama-3.1-405b"):
        wall, result = timed(lambda: simulate("h100-sxm", model, phase="decode", context=2048, tp=8), 1)
        s = result.summary
        print(f"{model} decode, batch 1, context 2048, TP 8 on h100-sxm")
        print(f"  simulated step time        {s['step_time_s'] * 1e3:10.3f} ms   "
              f"(exposed communication {s['exposed_comm_s'] * 1e3:.3f} ms)")
        print(f"  wall time, simulate()      {wall:10.3f} s")

    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-70b", phase="generate", batch=64, prompt=128,
                                          generate=2048), 1)
    s = result.summary
    print("Llama-2-70B generation, batch 64, prompt 128, 2048 new tokens, one h100-sxm (weights offloaded to host)")
    print(f"  simulated total            {s['total_s']:10.2f} s   ({s['tokens_per_s']:.1f} tokens/s)")
    print(f"  wall time, simulate()      {wall:10.3f} s")
    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-70b", phase="generate", batch=64, prompt=128,
                                          generate=2048, tp=4), 1)
    s = result.summary
    print("Llama-2-70B generation, batch 64, prompt 128, 2048 new tokens, 4 h100-sxm (TP 4)")
    print(f"  simulated total            {s['total_s']:10.2f} s   ({s['tokens_per_s']:.1f} tokens/s)")
    print(f"  wall time, simulate()      {wall:10.3f} s")
    sweep_benchmark()


def sweep_benchmark() -> None:
    """A 100-point sweep of a decode step on a 2-worker local pool."""
    import tempfile
    from pathlib import Path

    from memsim import sweep as sweeping

    base = dict(hw="h100-sxm", model="llama-2-7b", phase="decode", context=2048, batch=1)
    sweeps = sweeping.parse_sweeps(["sram.capacity=256KiB..128MiB:x2", "hbm.bandwidth=1TB/s..10TB/s:+1TB/s"])
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        res = sweeping.run_sweep(base, sweeps, Path(out), workers=2, progress=False)
        wall = time.perf_counter() - t0
    print(f"Sweep of a Llama-2-7B decode step: {len(res.rows)} points on 2 workers")
    print(f"  wall time                  {wall:10.2f} s   ({len(res.rows) / wall:.1f} points/s)")


if __name__ == "__main__":
    main()
