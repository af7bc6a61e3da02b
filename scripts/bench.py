#!/usr/bin/env python3
"""Benchmarks: prints figures, asserts nothing. Run: python scripts/bench.py [--repeat N]

- wall time of one Llama-2-7B decode step on h100-sxm (whole pipeline and engine alone),
  simulated events and events per second;
- event count against the number of layers (should grow linearly);
- wall time of a Llama-2-7B prefill step (4096 tokens);
- wall time of the Llama-3.1-70B and Llama-3.1-405B decode steps at TP 8;
- wall time of a 2048-token Llama-2-70B generation at batch 64, on one chip and on 4 (TP 4);
- wall time of a 100-point sweep of a decode step on a 2-worker local pool;
- the point rate of a 10,000-point sweep of a GPT-2 decode step at its start and at its end
  (target: within 1.5x; ``--long-sweep 0`` leaves it out);
- the wall time of a GPT-2-shaped model of 10,000 layers against 1,000 (target: at most 10x);
- wall time and peak memory of a run at each limit of ``memsim/core/limits.py`` (target: a minute
  and 2 GiB each; ``--no-limits`` leaves them out);
- wall time and peak memory of a Llama-2-7B decode step chunk by chunk
  (``memsim run --no-fast-forward``), in a process of its own;
- the targets of the concurrent engine against their figures, including the event rate of a
  chunk-by-chunk run (shortcuts off) against plain SimPy timeouts in the same process (a
  yardstick of 1,000,000 events; target: at least 40% of its rate);
- the wall time of ``memsim explain`` on a Llama-2-7B decode on h100-sxm (2 workers) against
  ``memsim run`` of the same step, each a process of its own (target: at most 10x);
- the README's quick-start ``memsim run`` as a user runs it, a process of its own with its default
  estimate lines (target: at most 1 s);
- ``memsim capacity`` of Llama-3.1-8B on h100-sxm with its defaults (target: at most 60 s on 2 cores);
- a serving run whose KV cache preempts sequences against the same requests on a cache that holds
  them (target: at most 2x);
- with ``--instructions`` (needs valgrind): the same comparison counted in machine instructions
  per event under callgrind, which no other load on the machine changes.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
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
    ap.add_argument("--long-sweep", type=int, default=10_000, help="points of the long sweep (0: leave it out)")
    ap.add_argument("--limits", action=argparse.BooleanOptionalAction, default=True,
                    help="a run at each limit of memsim/core/limits.py (--no-limits: leave them out)")
    ap.add_argument("--instructions", action="store_true",
                    help="only the instructions per event of the engine and of plain SimPy (valgrind's callgrind)")
    args = ap.parse_args()
    if args.instructions:
        instructions_per_event()
        return

    chip = hardware.load("h100-sxm")
    model = workload.model_config("llama-2-7b")
    step = workload.StepSpec.make("decode", batch=1, context=2048)

    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-7b", phase="decode", context=2048), args.repeat)
    graph = workload.build_step(model, step)
    plan = mapping.make_plan(graph, chip)
    eng_wall, eng = timed(lambda: engine.run(plan), args.repeat)
    print("Llama-2-7B decode, batch 1, context 2048, h100-sxm")
    print(f"  simulated step time        {result.summary.step_time_s * 1e3:10.3f} ms")
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
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(counts)]
    print(f"  marginal events per layer: {', '.join(f'{s:.1f}' for s in slopes)} (constant = linear)")

    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-7b", phase="prefill", prompt=4096),
                         max(1, args.repeat // 2))
    print("Llama-2-7B prefill, 4096 tokens, h100-sxm")
    print(f"  simulated step time        {result.summary.step_time_s * 1e3:10.3f} ms")
    print(f"  wall time, simulate()      {wall:10.3f} s")

    for model in ("llama-3.1-70b", "llama-3.1-405b"):
        wall, result = timed(lambda model=model: simulate("h100-sxm", model, phase="decode", context=2048, tp=8), 1)
        s = result.summary
        print(f"{model} decode, batch 1, context 2048, TP 8 on h100-sxm")
        print(f"  simulated step time        {s.step_time_s * 1e3:10.3f} ms   "
              f"(exposed communication {s.exposed_comm_s * 1e3:.3f} ms)")
        print(f"  wall time, simulate()      {wall:10.3f} s")

    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-70b", phase="generate", batch=64, prompt=128,
                                          generate=2048), 1)
    s = result.summary
    print("Llama-2-70B generation, batch 64, prompt 128, 2048 new tokens, one h100-sxm (weights offloaded to host)")
    print(f"  simulated total            {s.total_s:10.2f} s   ({s.tokens_per_s:.1f} tokens/s)")
    print(f"  wall time, simulate()      {wall:10.3f} s")
    wall, result = timed(lambda: simulate("h100-sxm", "llama-2-70b", phase="generate", batch=64, prompt=128,
                                          generate=2048, tp=4), 1)
    s = result.summary
    print("Llama-2-70B generation, batch 64, prompt 128, 2048 new tokens, 4 h100-sxm (TP 4)")
    print(f"  simulated total            {s.total_s:10.2f} s   ({s.tokens_per_s:.1f} tokens/s)")
    print(f"  wall time, simulate()      {wall:10.3f} s")
    sweep_benchmark()
    if args.long_sweep:
        long_sweep(args.long_sweep)
    layers_benchmark()
    explain_benchmark()
    serving_benchmark()
    if args.limits:
        limits_benchmark()
    peak_memory()
    cli_start_benchmark()
    quick_start_benchmark()
    capacity_benchmark()
    preemption_benchmark()
    targets()


def simpy_rate(events: int = 1_000_000) -> float:
    """Events per second of plain SimPy timeouts in one process: the engine's yardstick."""
    import simpy

    env = simpy.Environment()

    def ticker():
        for _ in range(events):
            yield env.timeout(1)

    env.process(ticker())
    t0 = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - t0)


def targets() -> None:
    """The concurrent engine's targets against their figures (wall time of simulate())."""
    runs = [
        ("Llama-2-7B decode on h100-sxm", 0.3, dict(hw="h100-sxm", model="llama-2-7b", context=2048)),
        ("Llama-3.1-70B decode at TP 8 (h100-sxm)", 1.0,
         dict(hw="h100-sxm", model="llama-3.1-70b", context=2048, tp=8)),
        ("Llama-3.1-405B decode on 16 sn40l (TP 16)", 2.0,
         dict(hw="sn40l", model="llama-3.1-405b", context=2048, tp=16)),
        ("Llama-2-70B int8 decode on 576 groq-lpu (TP 16 x PP 36)", 5.0,
         dict(hw="groq-lpu", model="llama-2-70b", weight_dtype="int8", context=2048, tp=16, pp=36)),
        ("Llama-3.1-8B prefill of 2048 tokens on wse-3, pipelined", 2.0,
         dict(hw="wse-3", model="llama-3.1-8b", phase="prefill", prompt=2048)),
    ]
    print("Targets")
    for label, target, kw in runs:
        wall, result = timed(lambda kw=kw: simulate(**kw), 1)
        verdict = "met" if wall <= target else "MISSED"
        print(f"  {label:58s} {wall:7.2f} s  (target <= {target:.1f} s: {verdict}; "
              f"{result.summary.step_time_s * 1e3:.3f} ms simulated)")
    # On a shared machine whose speed drifts by 10-20% from one second to the next: plain SimPy and the engine's
    # own event rate (the chunk-by-chunk rate the target is about) run in turns, five pairs, and the target is
    # read off the median of the pairs' ratios (each ratio compares two runs a second apart); the whole run's
    # rate (mapping and tables included) is the median of three.
    wall, result = timed(lambda: simulate("h100-sxm", "gpt2", context=1023, fast_forward=False), 3)
    graph = workload.build_step(workload.model_config("gpt2"), workload.StepSpec.make("decode", batch=1, context=1023))
    plan = mapping.make_plan(graph, hardware.load("h100-sxm"))
    ratios, runs, plains = [], [], []
    for _ in range(5):
        plains.append(simpy_rate())
        t0 = time.perf_counter()
        run = engine.run(plan, fast_forward=False, memoize=False)
        runs.append(time.perf_counter() - t0)
        ratios.append(run.events / runs[-1] / plains[-1])
    ratio, plain = statistics.median(ratios), statistics.median(plains)
    verdict = "met" if ratio >= 0.4 else "MISSED"
    print(f"  {'GPT-2 decode chunk by chunk (shortcuts off), engine':58s} {statistics.median(runs):7.2f} s  "
          f"({run.events / statistics.median(runs) / 1e6:.3f} M events/s = {ratio:.0%} of plain SimPy's "
          f"{plain / 1e6:.3f} M/s, median of 5 pairs, {min(ratios):.0%} to {max(ratios):.0%}; target >= 40%: {verdict})")
    whole = result.summary.engine.events / wall
    print(f"  {'  the same, simulate() (mapping and tables included)':58s} {wall:7.2f} s  "
          f"({whole / 1e6:.3f} M events/s = {whole / plain:.0%} of plain SimPy's)")


# Instructions per event, counted by callgrind in three processes that make the same plan and warm up
# alike: the third runs nothing more, the first the engine once more and the second SimPy's yardstick; each
# difference from the third, over its events, is what an event costs.
INSTRUCTIONS_CHILD = """
import json, sys
import simpy
from memsim import engine, hardware, mapping, workload
from memsim.core.presets import resolve
config = json.loads(resolve("gpt2", "models", (".json",)).read_text())
path = sys.argv[2]
open(path, "w").write(json.dumps({**config, "n_layer": 2}))
graph = workload.build_step(workload.model_config(path), workload.StepSpec.make("decode", batch=1, context=1023))
plan = mapping.make_plan(graph, hardware.load("h100-sxm"))
def ticks(n):
    env = simpy.Environment()
    def ticker():
        for _ in range(n):
            yield env.timeout(1)
    env.process(ticker())
    env.run()
events = engine.run(plan, fast_forward=False, memoize=False).events
ticks(1000)
if sys.argv[1] == "engine":
    engine.run(plan, fast_forward=False, memoize=False)
elif sys.argv[1] == "simpy":
    events = 200_000
    ticks(events)
print(events)
"""


def instructions_per_event() -> None:
    """The engine's chunk-by-chunk cost per event against plain SimPy's, in instructions."""
    import re
    import shutil
    import tempfile

    if shutil.which("valgrind") is None:
        print("instructions per event: valgrind is not installed")
        return
    with tempfile.TemporaryDirectory() as folder:
        procs = {mode: subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/{mode}.out", sys.executable, "-c",
             INSTRUCTIONS_CHILD, mode, f"{folder}/{mode}.json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True) for mode in ("base", "engine", "simpy")}
        counted, events = {}, {}
        for mode, proc in procs.items():
            out, err = proc.communicate()
            counted[mode] = int(re.search(r"Collected : (\d+)", err).group(1))
            events[mode] = int(out.split()[-1])
    engine_ir, simpy_ir = ((counted[m] - counted["base"]) / events[m] for m in ("engine", "simpy"))
    print("Instructions per event under callgrind (GPT-2 decode of 2 layers, context 1023, chunk by chunk)")
    print(f"  engine {engine_ir:8.0f}   plain SimPy timeouts {simpy_ir:8.0f}   "
          f"engine rate = {simpy_ir / engine_ir:.0%} of SimPy's at equal instructions per second")


def serving_benchmark() -> None:
    """``memsim serve``: 10,000 Poisson requests near saturation, Llama-3.1-8B on one h100-sxm (lognormal
    lengths around 512 prompt and 128 output tokens at 30 requests a second), the whole run timed."""
    import memsim

    t0 = time.perf_counter()
    r = memsim.serve("h100-sxm", "llama-3.1-8b", rate=30, count=10_000, prompt=512, output_tokens=128, lengths="lognormal",
                     seed=1)
    wall, s = time.perf_counter() - t0, r.summary
    print("memsim serve, 10,000 Poisson requests at 30/s, Llama-3.1-8B on h100-sxm (lognormal lengths)")
    print(f"  served {s.requests_per_s:.2f} req/s, TTFT p90 {s.ttft_s_p90 * 1e3:.1f} ms, TPOT p90 "
          f"{s.tpot_s_p90 * 1e3:.2f} ms, {s.surrogate.grid_steps} steps simulated, interpolation error "
          f"max {s.surrogate.max_error:.2%} on {s.surrogate.sampled} sampled steps")
    print(f"  wall time                  {wall:10.1f} s   (target <= 60 s on 2 cores: "
          f"{'met' if wall <= 60 else 'MISSED'})")
    t0 = time.perf_counter()
    r = memsim.serve("h100-sxm", "llama-3.1-8b", rate=30, count=2_000, prompt=512, output_tokens=128, lengths="lognormal",
                     seed=1, scheduler="chunked", max_tokens=2048)
    wall, s = time.perf_counter() - t0, r.summary
    print("  the same at 2,000 requests, chunked prefill (2,048-token budget): "
          f"{wall:.1f} s, {s.surrogate.grid_steps} steps simulated, error max {s.surrogate.max_error:.2%}")


def explain_benchmark() -> None:
    """``memsim explain`` against ``memsim run`` on the same step, each in a fresh process (imports
    included, as a user waits for them), alternately, the median of three each."""
    step = ["--hw", "h100-sxm", "--model", "llama-2-7b", "--context", "2048"]
    runs: dict[str, list[float]] = {}
    for _ in range(3):
        for command in (["run", *step], ["explain", *step, "--workers", "2"]):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"from memsim.cli.main import main; main({command!r})"],
                           capture_output=True, text=True, check=True)
            runs.setdefault(command[0], []).append(time.perf_counter() - t0)
    run_s, explain_s = (statistics.median(runs[c]) for c in ("run", "explain"))
    print("memsim explain, Llama-2-7B decode, context 2048, h100-sxm, 2 workers (median of 3, imports included)")
    print(f"  memsim run {run_s:6.2f} s   memsim explain {explain_s:6.2f} s   "
          f"{explain_s / run_s:.1f}x (target <= 10x)")


def cli_start_benchmark() -> None:
    """memsim --help and --version as the console script runs them, in fresh processes (median of 5):
    what a user waits for before any simulation (target <= 0.3 s, issue 44)."""
    for args in (["--help"], ["--version"]):
        took = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import sys; from memsim.cli.console import entry; "
                            f"sys.argv = ['memsim', *{args!r}]; entry()"], capture_output=True, check=True)
            took.append(time.perf_counter() - t0)
        print(f"memsim {args[0]:<10} {statistics.median(took):6.3f} s (median of 5, interpreter start included; "
              "target <= 0.3 s)")


QUICK_START = ["run", "--hw", "h100-sxm", "--model", "llama-2-7b", "--phase", "decode", "--batch", "1", "--context", "2048"]


def quick_start_benchmark() -> None:
    """The README's first command as a user runs it: the console script in a fresh process, interpreter
    start and imports included, writing its folder and printing its estimate lines (median of 3). The
    package's bytecode is compiled first, as ``pip install`` leaves it (a checkout run with
    PYTHONDONTWRITEBYTECODE set would otherwise compile every module again in every process)."""
    import compileall
    import tempfile

    import memsim

    compileall.compile_dir(os.path.dirname(memsim.__file__), quiet=1)
    took = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import sys; from memsim.cli.console import entry; "
                            f"sys.argv = ['memsim', *{QUICK_START!r}, '--out', {out!r}]; entry()"],
                           capture_output=True, check=True)
            took.append(time.perf_counter() - t0)
    wall = statistics.median(took)
    print(f"quick start (memsim run, README)  {wall:6.2f} s (median of 3, a process each; target <= 1 s: "
          f"{'met' if wall <= 1 else 'MISSED'})")


def capacity_benchmark() -> None:
    """``memsim capacity`` with its defaults (60 s of arrivals a rate, 10 s warm-up, doubled from 1 a second
    and bisected 4 times) for Llama-3.1-8B on h100-sxm, prompt 512 and output 128 tokens."""
    from memsim.serving.capacity import CapacitySpec, find
    from memsim.serving.spec import ServeSpec

    t0 = time.perf_counter()
    result = find(ServeSpec(hw="h100-sxm", model="llama-3.1-8b", check=0), CapacitySpec())
    wall = time.perf_counter() - t0
    print(f"memsim capacity, Llama-3.1-8B on h100-sxm: {result.capacity.text()} after "
          f"{len(result.capacity.points)} rates; {wall:.1f} s (target <= 60 s: {'met' if wall <= 60 else 'MISSED'})")


def preemption_benchmark() -> None:
    """The same 400 requests, all at once, on a KV cache that holds them and on one that a quarter of the HBM
    leaves (about 1,900 blocks), which preempts (recomputes) sequences as they grow: each run's wall time."""
    import warnings

    import memsim
    from memsim.core.errors import MemsimWarning

    kw = dict(rate=1000.0, count=400, prompt=512, output_tokens=256, seed=3, check=0, max_seqs=256)
    t0 = time.perf_counter()
    roomy = memsim.serve("h100-sxm", "llama-3.1-8b", **kw).summary
    plain = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MemsimWarning)
        t0 = time.perf_counter()
        tight = memsim.serve("h100-sxm", "llama-3.1-8b", set=[("stack.serving.kv_fraction", "0.25")], **kw).summary
        preempting = time.perf_counter() - t0
    print(f"serving with preemptions: {tight.preemptions:,} preemptions in {tight.steps:,} steps {preempting:.1f} s, "
          f"without ({roomy.preemptions} in {roomy.steps:,} steps) {plain:.1f} s: {preempting / plain:.1f}x "
          f"(target <= 2x: {'met' if preempting <= 2 * plain else 'MISSED'})")


# Run in a fresh process, so that its peak resident set size is the run's alone (``ru_maxrss`` is
# in KiB on Linux). The time counts the imports, as a user of ``memsim run`` waits for them too.
CHILD = """
import json, resource, tempfile, time
t0 = time.perf_counter()
from memsim.cli.main import main
with tempfile.TemporaryDirectory() as out:
    main(ARGS + ["--out", out], standalone_mode=False)
try:  # this process's own peak: getrusage's also holds the peak of the parent it was forked from
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall_s": time.perf_counter() - t0, "peak_rss_bytes": peak}))
"""


def peak_memory() -> None:
    """Llama-2-7B decode chunk by chunk: its time and peak memory (``getrusage`` in a subprocess)."""
    args = ["run", "--hw", "h100-sxm", "--model", "llama-2-7b", "--phase", "decode", "--context", "2048",
            "--no-fast-forward"]
    out = subprocess.run([sys.executable, "-c", CHILD.replace("ARGS", repr(args))], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print("Llama-2-7B decode, context 2048, h100-sxm, chunk by chunk (memsim run --no-fast-forward)")
    print(f"  wall time, memsim run      {got['wall_s']:10.2f} s   (imports and output files included)")
    print(f"  peak memory (max RSS)      {got['peak_rss_bytes'] / 2**20:10.0f} MiB (target < 2 GiB; "
          "VmHWM of its own process)")


def limits_benchmark() -> None:
    """A run at each limit of ``memsim/core/limits.py``, with the console's defaults, each in a process
    of its own: wall time and peak memory (target: a minute and 2 GiB each)."""
    import tempfile
    from pathlib import Path

    from memsim.core import limits
    from memsim.core.presets import resolve

    gpt2 = json.loads(resolve("gpt2", "models", (".json",)).read_text())
    wide = {"model_type": "llama", "hidden_size": 16384, "intermediate_size": 65536, "num_hidden_layers": 2,
            "num_attention_heads": limits.MAX_RANKS, "num_key_value_heads": limits.MAX_RANKS, "vocab_size": 32768,
            "max_position_embeddings": 4096}
    ops = len(workload.build_step(workload.model_config("gpt2"), workload.StepSpec.make("decode", context=1023)).ops)
    micro = limits.MAX_TASKS // ops
    print("At memsim's limits (memsim/core/limits.py), memsim run with its defaults, each in a process of its own")
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "wide.json").write_text(json.dumps(wide))
        (Path(folder) / "deep.json").write_text(json.dumps({**gpt2, "n_layer": limits.MAX_LAYERS}))
        cases = [
            (f"{limits.MAX_RANKS} ranks (a 2-layer model, --tp {limits.MAX_RANKS})",
             ["--model", f"{folder}/wide.json", "--tp", str(limits.MAX_RANKS)]),
            (f"{limits.MAX_CHIPS:,} chips (Llama-3.1-405B, --chips {limits.MAX_CHIPS})",
             ["--model", "llama-3.1-405b", "--chips", str(limits.MAX_CHIPS)]),
            (f"{limits.MAX_LAYERS:,} layers (GPT-2 shapes, context 16)",
             ["--model", f"{folder}/deep.json", "--context", "16"]),
            (f"{micro * ops:,} tasks (GPT-2, --pp 4, {micro} micro-batches)",
             ["--model", "gpt2", "--pp", "4", "--batch", str(micro), "--microbatches", str(micro)]),
            (f"{limits.MAX_STEPS:,} decode steps (Llama-3.2-1B, --phase generate)",
             ["--model", "llama-3.2-1b", "--phase", "generate", "--generate", str(limits.MAX_STEPS), "--prompt", "16"]),
        ]
        for what, args in cases:
            out = subprocess.run([sys.executable, "-c", CHILD.replace("ARGS", repr(["run", *args]))],
                                 capture_output=True, text=True, check=True)
            if out.returncode:
                print(f"  {what:<52} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            got = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {what:<52} {got['wall_s']:7.1f} s  {got['peak_rss_bytes'] / 2**20:6.0f} MiB")


def sweep_benchmark() -> None:
    """A 100-point sweep of a decode step on a 2-worker local pool."""
    import tempfile
    from pathlib import Path

    from memsim.sweep import runner as sweeping

    base = dict(hw="h100-sxm", model="llama-2-7b", phase="decode", context=2048, batch=1)
    sweeps = sweeping.parse_sweeps(["sram.capacity=256KiB..128MiB:x2", "hbm.bandwidth=1TB/s..10TB/s:+1TB/s"])
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        res = sweeping.run_sweep(base, sweeps, Path(out), workers=2, progress=False)
        wall = time.perf_counter() - t0
    print(f"Sweep of a Llama-2-7B decode step: {len(res.rows)} points on 2 workers")
    print(f"  wall time                  {wall:10.2f} s   ({len(res.rows) / wall:.1f} points/s)")


def long_sweep(points: int) -> None:
    """A sweep of ``points`` equal-work GPT-2 decode points on a 2-worker pool: the point rate over
    its first and its last tenth (results.csv is appended, so the rate should not fall)."""
    import tempfile
    from pathlib import Path

    from memsim.sweep import runner as sweeping
    from memsim.sweep import store as sweep_store

    done: list[float] = []
    add = sweep_store.Results.add
    sweep_store.Results.add = lambda self, row: (add(self, row), done.append(time.perf_counter()))[0]
    try:
        step = 10**9  # 1 GB/s apart: every point does the same work
        sweeps = sweeping.parse_sweeps([f"hbm.bandwidth=1TB/s..{10**12 + (points - 1) * step}B/s:+{step}B/s"])
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            res = sweeping.run_sweep(dict(hw="h100-sxm", model="gpt2", phase="decode", context=64), sweeps,
                                     Path(out), workers=2, progress=False)
            wall = time.perf_counter() - t0
    finally:
        sweep_store.Results.add = add
    tenth = max(2, len(done) // 10)
    first = (tenth - 1) / (done[tenth - 1] - done[0])
    last = (tenth - 1) / (done[-1] - done[-tenth])
    print(f"Sweep of a GPT-2 decode step: {len(res.rows)} points on 2 workers")
    print(f"  wall time                  {wall:10.2f} s   ({len(res.rows) / wall:.1f} points/s)")
    print(f"  point rate, first tenth    {first:10.1f} points/s")
    print(f"  point rate, last tenth     {last:10.1f} points/s   (first / last {first / last:.2f}; target <= 1.5)")


def layers_benchmark() -> None:
    """A GPT-2-shaped decode step of 1,000 and of 10,000 layers (the loader's limit): wall time of
    ``memsim run --model`` with its defaults, each in a process of its own, and of ``simulate()``
    alone, with the records each layer leaves (10,000 GPT-2 layers outgrow an H100's HBM, so
    their weights stream from host memory over PCIe: more records a layer)."""
    import tempfile
    from pathlib import Path

    from memsim.core.presets import resolve

    config = json.loads(resolve("gpt2", "models", (".json",)).read_text())
    cli: dict[int, list[float]] = {}
    api_s, records = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for layers in (1_000, 10_000):
            path = Path(folder) / f"gpt2-{layers}.json"
            path.write_text(json.dumps({**config, "n_layer": layers}))
        for _ in range(3):  # alternately, the median of three each: one run varies by 10% on a shared machine
            for layers in (1_000, 10_000):
                args = ["run", "--model", str(Path(folder) / f"gpt2-{layers}.json"), "--context", "16"]
                out = subprocess.run([sys.executable, "-c", CHILD.replace("ARGS", repr(args))], capture_output=True,
                                     text=True, check=True)
                cli.setdefault(layers, []).append(json.loads(out.stdout.strip().splitlines()[-1])["wall_s"])
        cli_s = {layers: statistics.median(times) for layers, times in cli.items()}
        for layers in (1_000, 10_000):
            path = Path(folder) / f"gpt2-{layers}.json"
            t0 = time.perf_counter()
            result = simulate("h100-sxm", str(path), context=16, sensitivity=0)
            api_s[layers] = time.perf_counter() - t0
            records[layers] = len(result.engine.records) / layers
    print("GPT-2-shaped decode step, context 16, h100-sxm, by layers")
    for layers in (1_000, 10_000):
        print(f"  {layers:>6,} layers  memsim run {cli_s[layers]:7.2f} s   simulate() {api_s[layers]:7.2f} s   "
              f"{records[layers]:5.1f} records a layer")
    print(f"  10,000 / 1,000 layers: memsim run {cli_s[10_000] / cli_s[1_000]:.1f}x (target <= 10x; median of 3), "
          f"simulate() {api_s[10_000] / api_s[1_000]:.1f}x")


if __name__ == "__main__":
    main()
