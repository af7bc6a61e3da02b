"""The figures the README and the docs/ pages quote, simulated on the current commit.

    python scripts/figures.py            print every block as the pages hold it
    python scripts/figures.py --write    rewrite the blocks in their pages
    python scripts/figures.py --check    exit 1 unless every number in the blocks is within 1%
                                         of this commit's (tests/test_figures.py)

A block sits in README.md or a page of docs/ between ``<!-- figures:NAME -->`` and
``<!-- /figures:NAME -->``; everything between the markers is this script's output, never
typed by hand.
"""
from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memsim import hardware, simulate
from memsim.core.errors import MemsimWarning
from memsim.report import Summary
from memsim.validation import llmcompass, report

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))  # where blocks may sit
TOLERANCE = 0.01
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Run:
    """One ``simulate`` call, as a user types it: hardware, model and options."""

    hw: str
    model: str
    options: dict = field(default_factory=dict)
    sets: dict = field(default_factory=dict)

    def flags(self) -> str:
        parts = [f"--{k.replace('_', '-')} {v}" for k, v in self.options.items()]
        parts += [f"--set {k}={v}" for k, v in self.sets.items()]
        return " ".join(parts)

    def summary(self) -> Summary:
        with warnings.catch_warnings():  # a figure's spills are what it shows (the SRAM cliff): not to be said again
            warnings.simplefilter("ignore", MemsimWarning)
            return simulate(self.hw, self.model, **self.options, set=dict(self.sets)).summary


def ms(seconds: float) -> str:
    """Three significant figures, in ms."""
    value = seconds * 1e3
    return f"{value:#.3g}" if value < 100 else f"{value:.0f}"


def _largest_stall(s: Summary) -> str:
    """The cause a chip waits on most, besides a pipeline stage's wait for the others (``bubble``)."""
    stalls = {k: v for k, v in s.stall_s.items() if k != "bubble" and v > 0}
    return max(stalls, key=stalls.get) if stalls else "none"


# Llama-3.1-8B decode on every preset (batch 1, context 512), bf16 on one chip unless stated:
# the options are what it takes to fit (tests/core/test_presets.py runs the same).
EVERY_PRESET = {
    "groq-lpu": {"weight_dtype": "int8", "tp": 16, "pp": 4},
    "wormhole-n150": {"weight_dtype": "int8"},
    "wormhole-galaxy": {"tp": 32},
}


def every_preset() -> str:
    rows = ["| preset | options | chips | step | over roofline | roofline bound | largest stall (besides bubbles) |",
            "|---|---|---|---|---|---|---|"]
    for name in hardware.presets():
        fit = Run(name, "llama-3.1-8b", EVERY_PRESET.get(name, {}))  # the options the table shows
        s = Run(name, fit.model, {"context": 512, **fit.options}).summary()
        rows.append(f"| `{name}` | {f'`{fit.flags()}`' if fit.options else ''} "
                    f"| {s.chips} | {ms(s.step_time_s)} ms | ×{s.step_over_roofline:.3g} "
                    f"| {s.roofline_bound} | {_largest_stall(s)} |")
    return "\n".join(rows)


# Deployments that vendors describe, decode at batch 1 and context 1024. The vendor column is a
# one-token-per-step figure where the source gives one (Cerebras, per token); SambaNova's and
# Groq's published rates are speculative or unstated and are not set beside them (README,
# Speculative decoding).
DEPLOYMENTS = (
    (Run("groq-lpu", "llama-2-70b", {"weight_dtype": "int8", "tp": 8, "pp": 72, "context": 1024}), None),
    (Run("groq-lpu", "llama-3.1-70b", {"weight_dtype": "int8", "tp": 8, "pp": 72, "context": 1024}), None),
    (Run("groq-lpu", "llama-3.1-8b", {"weight_dtype": "int8", "tp": 8, "pp": 8, "context": 1024}), None),
    (Run("sn40l", "llama-3.1-70b", {"tp": 16, "context": 1024}), None),
    (Run("sn40l", "llama-3.1-70b", {"tp": 16, "context": 1024}, {"hbm.bandwidth": "6.4TB/s"}), None),
    (Run("wse-3", "llama-3.1-8b", {"context": 1024}), 0.544e-3),
    (Run("wse-3", "llama-3.1-70b", {"pp": 4, "context": 1024}), 2.247e-3),
    (Run("wse-3", "llama-3.1-8b", {"context": 1024}, {"sram.capacity": "16.3GB"}), None),
    (Run("wse-3", "llama-3.1-8b", {"context": 1024}, {"sram.capacity": "16GB"}), None),
)


def deployments() -> str:
    rows = ["| preset | model | options | chips | step | roofline bound | largest stall (besides bubbles) | vendor, per token |",
            "|---|---|---|---|---|---|---|---|"]
    for run, vendor in DEPLOYMENTS:
        s = run.summary()
        told = f"{ms(vendor)} ms ({s.step_time_s / vendor - 1:+.1%})" if vendor else ""
        rows.append(f"| `{run.hw}` | `{run.model}` | `{run.flags()}` | {s.chips} | {ms(s.step_time_s)} ms "
                    f"| {s.roofline_bound} | {_largest_stall(s)} | {told} |")
    return "\n".join(rows)


def power_cap() -> str:
    run = Run("h100-sxm", "llama-2-7b", {"phase": "prefill", "prompt": 2048})
    rows = ["| cap | step | clock | energy | power-limited |", "|---|---|---|---|---|"]
    for watts in (700, 400, 250):
        s = Run(run.hw, run.model, run.options, {"execution.power_cap": f"{watts}W"}).summary()
        rows.append(f"| {watts} W | {ms(s.step_time_s)} ms | {s.clock_mhz:.0f} MHz "
                    f"| {s.energy_j.total:.3g} J | {'yes' if s.power_limited else 'no'} |")
    return "\n".join(rows)


def gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g}"


def _stalls(s: Summary, top: int = 3) -> str:
    ranked = sorted(((k, v) for k, v in s.stall_s.items() if v > 0), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {ms(v)} ms" for k, v in ranked)


def shows() -> str:
    """The bullets of the README's "What the simulator shows"."""
    h100 = Run("h100-sxm", "llama-2-7b", {"context": 2048}).summary()
    sizes = ("256KiB", "512KiB", "1MiB", "2MiB", "4MiB", "8MiB", "16MiB", "32MiB", "64MiB")
    sweep = [Run("h100-sxm", "llama-2-7b", {"phase": "prefill", "prompt": 4096}, {"sram.capacity": c}).summary()
             for c in sizes]
    wafer = Run("wse-3", "llama-3.1-8b", {"context": 2048}).summary()
    off_wafer = sum(v.total for k, v in wafer.bytes_per_level.items() if k != "sram")
    pre = Run("wse-3", "llama-3.1-8b", {"phase": "prefill", "prompt": 2048}).summary()
    big = Run("wse-3", "llama-3.1-70b", {"context": 2048}).summary()
    four = Run("wse-3", "llama-3.1-70b", {"context": 2048, "pp": 4}).summary()
    one = Run("sn40l", "llama-3.1-70b", {"context": 2048}).summary()
    fetch = Run("sn40l", "llama-3.1-70b", {"tp": 16, "context": 2048}).summary()
    nofetch = Run("sn40l", "llama-3.1-70b", {"tp": 16, "context": 2048}, {"execution.weight_prefetch": "0"}).summary()
    huge = Run("sn40l", "llama-3.1-405b", {"tp": 16, "context": 2048}).summary()
    quant = [Run("a100-80gb-sxm", "llama-2-7b", {"context": 2048, **o}).summary()
             for o in ({}, {"weight_dtype": "int8"}, {"weight_dtype": "int4", "group_size": 32})]
    left = {k: v for k, v in fetch.stall_s.items() if k.startswith("link:")}
    return "\n".join([
        "- **Decode is HBM-bound on GPUs.**",
        f"  - Llama-2-7B, bf16, batch 1, context 2048 on `h100-sxm`: the step takes {ms(h100.step_time_s)} ms "
        f"against a {ms(h100.roofline_s)} ms roofline (×{h100.step_over_roofline:.3g}).",
        f"  - HBM reads are {gb(h100.bytes_per_level['hbm'].read)} GB: every weight byte the step needs "
        f"({gb(h100.weight_bytes)} GB: all matrices plus the embedding rows used) plus the "
        f"{gb(h100.kv_cache_bytes)} GB KV cache. The small activations pass through L2.",
        f"  - The largest stalls: {_stalls(h100)}.",
        "- **SRAM capacity drives prefill traffic.** Llama-2-7B prefill of 4096 tokens on `h100-sxm`,",
        "  sweeping `sram.capacity`:",
        "",
        "  | sram.capacity | " + " | ".join(sizes) + " |",
        "  |---|" + "---|" * len(sizes),
        "  | HBM bytes (GB) | " + " | ".join(gb(s.bytes_per_level["hbm"].total) for s in sweep) + " |",
        "  | step time (ms) | " + " | ".join(ms(s.step_time_s) for s in sweep) + " |",
        "",
        "  Small tiles re-fetch the GEMMs' operands: more SRAM cuts the traffic at every size. Below",
        "  about 1 MiB (a few KiB per SM) each SM's tile is so small that shared memory cannot feed",
        "  its tensor cores, and more SRAM cuts the time too; above, the step is compute-bound.",
        "- **A wafer keeps an 8B model on chip.** Llama-3.1-8B on `wse-3`:",
        f"  - A decode step at context 2048 takes {ms(wafer.step_time_s)} ms and moves {gb(off_wafer)} GB "
        "off the wafer. Each layer runs in a region of its own; the token passes through the 32",
        "    regions in turn, and each matrix op's broadcast and reduction across its part of the",
        "    region pay a fabric traversal.",
        f"  - A prefill of 2048 tokens flows through the regions in chunks: {ms(pre.step_time_s)} ms, "
        f"×{pre.step_over_roofline:.3g} its roofline, with {pre.compute_utilization:.1%} of the wafer's "
        "compute used. The fabric's traversals of a chunk's activations run before the chunk's",
        "    compute, not beside it, so this is an upper estimate.",
        f"  - Llama-3.1-70B does not fit in 44 GB: {gb(big.bytes_per_level['memoryx'].read)} GB of "
        f"weights stream from MemoryX over the I/O link, which then dominates ({ms(big.step_time_s)} ms); "
        "each layer runs on the whole wafer, the next layers' weights prefetched while it computes.",
        f"    On four CS-3 pipelined by layers (`--pp 4`) a token takes {ms(four.step_time_s)} ms.",
        f"- **An RDU stages what HBM cannot hold.** Llama-3.1-70B on one `sn40l` reads "
        f"{gb(one.bytes_per_level['ddr'].read)} GB from DDR",
        "  each step: GEMMs whose weights fit the SRAM staging area are prefetched straight into it",
        "  (`ddr` → `sram`), larger ones are staged into HBM (`ddr` → `hbm` transfers and `ddr` stalls).",
        "- **Prefetch hides the memory wall on a dataflow chip.** Llama-3.1-70B decode on 16 `sn40l`",
        f"  (`--tp 16`, context 2048) takes {ms(fetch.step_time_s)} ms with the family's default "
        f"`weight_prefetch: 2`, against {ms(nofetch.step_time_s)} ms",
        f"  with `--set execution.weight_prefetch=0`: the HBM stall falls from {ms(nofetch.stall_s['hbm'])} ms "
        f"to {ms(fetch.stall_s['hbm'])} ms, while the step stays HBM-bound",
        f"  (roofline bound `{fetch.roofline_bound}`). The all-reduces over the RDU network leave "
        f"{ms(sum(left.values()))} ms exposed. Llama-3.1-405B on the same 16 chips takes {ms(huge.step_time_s)} ms.",
        "- **Quantized weights.** On `a100-80gb-sxm`, Llama-2-7B decode at context 2048 takes "
        + ", ".join(f"{ms(s.step_time_s)} ms ({name})" for s, name in zip(quant, ("bf16", "int8", "int4 g32"))),
        "  for weight bytes of " + ", ".join(gb(s.weight_bytes) for s in quant)
        + f" GB plus the {gb(quant[0].kv_cache_bytes)} GB KV cache. The speedup follows the bytes moved, "
        "less the unpacking.",
    ])


def validate_calibration() -> str:
    """The calibration table (``memsim.validation.report``; ``scripts/validate.py`` prints it)."""
    return report.calibration_markdown(report.calibrate())


def validate_microbench() -> str:
    """The microbenchmark table (``memsim.validation.report``; ``scripts/validate.py`` prints it)."""
    return report.microbench_markdown(report.microbenchmarks())


def validate_measured() -> str:
    """The table of rows measured here (``scripts/gpu_measure.py``; ``scripts/validate.py`` prints it)."""
    return report.microbench_markdown(report.microbenchmarks(report.MEASURED))


def validate_runtime() -> str:
    """The runtime table: runtime.csv's rows as memsim runs them (``memsim.validation.runtime``)."""
    from memsim.validation import runtime

    return runtime.markdown(*runtime.outcomes())


def validate_llmcompass() -> str:
    """LLMCompass's GPT-3 layer case (``memsim.validation.report``)."""
    return report.llmcompass_markdown(llmcompass.rows())


def validate_serving() -> str:
    """TensorRT-LLM's offline serving throughput (``memsim.validation.serving``; ``scripts/validate.py --serving``)."""
    from memsim.validation import serving

    return serving.markdown(serving.rows())


def serve_capacity() -> str:
    """Requests a second within p90 TTFT and TPOT SLOs on three chips (``scripts/capacity.py``)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import capacity

    return capacity.markdown(capacity.study())


def memory_wall_table() -> str:
    """The case study's table at N = 1024 (``scripts/memory_wall.py``)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import memory_wall

    names = {"bert-base": "BERT-Base", "bert-large": "BERT-Large", "gpt2": "GPT-2"}
    rows = ["| model | FLOPs | MOPs | FLOP/B | latency |", "|---|---|---|---|---|"]
    for r in memory_wall.case_study([1024]).itertuples():
        rows.append(f"| {names[r.model]} | {r.flops / 1e9:.0f} G | {gb(r.mops)} GB | {r.arithmetic_intensity:.3g} | "
                    f"{r.latency_s:.3g} s |")
    return "\n".join(rows)


def sram_cliff() -> str:
    """Step time of a Llama-3.1-8B decode step on ``wse-3`` against its SRAM (``scripts/sram_cliff.py``)."""
    sizes = (2, 4, 8, 16, 32, 64)
    t = {g: Run("wse-3", "llama-3.1-8b", sets={"sram.capacity": f"{g}GB"}).summary().step_time_s for g in sizes}
    fit = max(sizes[1:], key=lambda g: t[g // 2] / t[g])  # where one doubling gains most
    return (f"  - Below {fit} GB the weights that do not fit stream from MemoryX every step: {ms(t[2])} ms at 2 GB,\n"
            f"    {ms(t[fit // 2])} ms at {fit // 2} GB.\n"
            f"  - At {fit} GB they fit, nothing leaves the wafer, and the step takes {ms(t[fit])} ms. That is the\n"
            f"    cliff, {t[fit // 2] / t[fit]:.0f}x in one doubling.")


BLOCKS: dict[str, Callable[[], str]] = {"every-preset": every_preset, "deployments": deployments,
                                        "power-cap": power_cap, "shows": shows,
                                        "validate-calibration": validate_calibration,
                                        "validate-microbench": validate_microbench,
                                        "validate-measured": validate_measured,
                                        "validate-llmcompass": validate_llmcompass,
                                        "validate-runtime": validate_runtime,
                                        "memory-wall": memory_wall_table, "sram-cliff": sram_cliff,
                                        "validate-serving": validate_serving, "serve-capacity": serve_capacity}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"


def page_of(name: str, texts: dict[Path, str] | None = None) -> Path:
    """The page that holds block ``name`` (in ``texts``, the pages as read, where given)."""
    begin = markers(name)[0]
    text = (lambda p: texts[p]) if texts is not None else (lambda p: p.read_text(encoding="utf-8"))
    page = next((p for p in PAGES if begin in text(p)), None)
    if page is None:
        raise SystemExit(f"no page holds the block {begin} (README.md, docs/*.md)")
    return page


def block_in(text: str, name: str) -> str:
    begin, end = markers(name)
    if begin not in text or end not in text:
        raise SystemExit(f"no block {begin} ... {end}")
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def differences(written: str, fresh: str) -> list[str]:
    """Where ``written`` and ``fresh`` differ beyond the tolerance: words exactly, numbers within 1%."""
    if NUMBER.sub("#", written) != NUMBER.sub("#", fresh):
        return ["the text differs (not only its numbers)"]
    out = []
    for a, b in zip(NUMBER.findall(written), NUMBER.findall(fresh)):
        x, y = float(a), float(b)
        if abs(x - y) > TOLERANCE * max(abs(y), 1e-12):
            out.append(f"{a} in the page, {b} now")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the blocks in their pages")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the blocks' figures are within 1%%")
    ap.add_argument("--only", choices=sorted(BLOCKS), action="append", help="these blocks only")
    args = ap.parse_args(argv)
    names = args.only or list(BLOCKS)
    fresh = {name: BLOCKS[name]() for name in names}  # minutes of simulation, before any page is read
    texts = {p: p.read_text(encoding="utf-8") for p in PAGES}  # so that an edit made meanwhile is kept
    failed, written = False, set()
    for name in names:
        page = page_of(name, texts)
        if args.check:
            for d in differences(block_in(texts[page], name), fresh[name]):
                print(f"{page.relative_to(ROOT)}, block {name}: {d}")
                failed = True
        elif args.write:
            begin, end = markers(name)
            block_in(texts[page], name)
            head, rest = texts[page].split(begin, 1)
            texts[page] = f"{head}{begin}\n{fresh[name]}\n{end}{rest.split(end, 1)[1]}"
            written.add(page)
        else:
            print(f"{markers(name)[0]}\n{fresh[name]}\n{markers(name)[1]}\n")
    for page in written:
        page.write_text(texts[page], encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
