"""A row of ``calibration.csv`` (a published end-to-end measurement) as a memsim run.

Decode rows become one decode step, prefill rows (time to first token with one output
token) the prefill of the prompt, which produces the first token (where the row's stack takes
the first token from a decode step, ``Stack``, a prefill of all but the last prompt token and
that step). Whole generations run as phase ``generate``. Tensor-parallel rows run
with ``tp``, and a row measured under a power cap ("330W cap") runs with ``execution.power_cap``
set to it. Rows that need something memsim does not model are skipped with the reason.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from memsim.run import api

# The sources the presets' calibrated parameters are fitted on (docs/validation.md, Calibration): all four.
FITTED_ON = ("pytorch-labs/gpt-fast", "NVIDIA/TensorRT-LLM", "InternLM/lmdeploy", "NVIDIA/FasterTransformer")
MODELS = {"Llama-2-7B": "llama-2-7b", "Llama-2-13B": "llama-2-13b", "Llama-2-70B": "llama-2-70b",
          "Llama-3.1-8B": "llama-3.1-8b", "GPT-J-6B": "gpt-j-6b", "GPT-3-175B (FT GPT-175B)": "gpt-3-175b",
          "GPT-20B (FT GPT-20B)": "gpt-20b-ft", "GPT-6.7B (FT GPT-6.7B)": "gpt-3-6.7b"}
CHIPS = {"A100": "a100-80gb-sxm", "H100": "h100-sxm"}


@dataclass(frozen=True)
class Case:
    """One row, ready to simulate: ``kwargs`` for ``memsim.run.api.simulate`` less ``set``."""

    id: str
    source: str
    label: str
    measured_ms: float
    kwargs: dict | None  # None: skipped
    why: str  # what is simulated, or why the row is skipped
    settings: tuple[tuple[str, str], ...] = ()  # hardware fields the row was measured with (a power cap, its system)
    stack: str = "gpt-fast"  # the profile of the stack it was measured on (configs/stacks)


def weight_format(text: str) -> tuple[str, int]:
    """'int4 weight-only g32' -> ('int4', 32); 'bf16' -> ('bf16', 128)."""
    dtype = text.split()[0]
    group = re.search(r"\bg(\d+)\b", text)
    return dtype, int(group.group(1)) if group else 128


def chip_of(text: str) -> str | None:
    return next((preset for key, preset in CHIPS.items() if key in text), None)


def power_cap(text: str) -> tuple[tuple[str, str], ...]:
    """'NVIDIA A100-80GB SXM (330W cap)' -> (("execution.power_cap", "330 W"),); no cap named: ()."""
    cap = re.search(r"(\d+(?:\.\d+)?)\s*W cap", text)
    return (("execution.power_cap", f"{cap.group(1)} W"),) if cap else ()


# The system a row was measured on, where its notes name one other than the preset's NVSwitch
# node. An 8-GPU hybrid cube mesh (DGX-1 style) is two quads of fully connected GPUs, each GPU
# also cabled to its twin in the other quad: a dragonfly of groups of 4 with one global link a
# chip. PyTorch's intra-node all-reduce (ENABLE_INTRA_NODE_COMM=1) runs its hybrid-cube-mesh
# algorithm there, which reduces within the quads and then across them (pytorch/pytorch#114001):
# memsim's hierarchical all-reduce. The 12 NVLinks of an A100 go 3 to each of its 4 peers.
HYBRID_CUBE_MESH = (("system.topology", "dragonfly"), ("system.group", "4"), ("system.global_links", "1"),
                    ("system.links_per_peer", "3"), ("system.collective", "hierarchical"))


@dataclass(frozen=True)
class Stack:
    """A row's serving stack: its profile (``configs/stacks``) and how it produces a first token."""

    name: str = "gpt-fast"  # the profile in configs/stacks
    # Its first token comes from a decode step over the last prompt token, after a prefill of the others.
    first_token_by_decode: bool = False


# Each source's stack, by the first name its rows' software_stack contains (TurboMind's rows also
# name FasterTransformer, from which it derives, so it comes first); the profiles say what each rests
# on. TurboMind v0.1.0a1 takes its first token from a decode step: LlamaBatch::ContextDecode "subtract
# input/context len by 1 to skip last input token (will process with decoder later)"
# (src/turbomind/models/llama/LlamaBatch.cc @ tag v0.1.0a1). So its first-token latency is a prefill
# of the prompt less one token and a decode step at the prompt's length.
STACKS = {"TurboMind": Stack("turbomind-0.1", first_token_by_decode=True),
          "FasterTransformer": Stack("fastertransformer-5"),
          "TensorRT-LLM": Stack("trtllm-0.9")}
BY_DECODE = "the first token: a prefill of all but the last prompt token, then its decode step"


def stack_of(software: str) -> Stack:
    """What a row's serving stack does (``Stack()``: the preset's defaults)."""
    return next((stack for name, stack in STACKS.items() if name in software), Stack())


def system_of(notes: str) -> tuple[tuple[str, str], ...]:
    """The system fields of the machine a row's notes name (``()``: the preset's own)."""
    return HYBRID_CUBE_MESH if "hybrid cube mesh" in notes.lower() else ()


def whole(row: dict) -> bool:
    """Whether a row times a whole generation (a prefill and its decode steps), not one step."""
    return row["phase"].startswith("end-to-end")


def measured_ms(row: dict) -> float:
    """What the row measured, in ms: a decode step (derived where the row gives a total), a
    prefill, or a whole generation as published."""
    if row["derived_ms_per_decode_step"] and not whole(row):
        return float(row["derived_ms_per_decode_step"])
    scale = {"ms": 1.0, "s": 1e3}.get(row["unit"])
    if scale is None:
        raise ValueError(f"row {row['id']}: unit {row['unit']!r} is not a time")
    return float(row["value"]) * scale


def source_of(row: dict) -> str:
    """The publication a row comes from (its URL without the part after the first space)."""
    return row["source"].split()[0]


def case(row: dict) -> Case:
    model, chip = MODELS.get(row["model"]), chip_of(row["accelerator"])
    dtype, group = weight_format(row["weight_precision"])
    name = row["model"].split(" (")[0]  # "GPT-3-175B (FT GPT-175B)" -> "GPT-3-175B"
    label = f"{name} {'generation' if whole(row) else row['phase']} {row['weight_precision'].split()[0]}"
    stack = stack_of(row.get("software_stack", ""))
    base = Case(row["id"], source_of(row), label, measured_ms(row), None, "",
                power_cap(row["accelerator"]) + system_of(row.get("notes", "")), stack.name)
    tp = re.fullmatch(r"TP(\d+)", row["parallelism"].strip())
    if tp is None or int(tp.group(1)) != int(row["n_accelerators"]):
        return _skip(base, f"parallelism {row['parallelism']} on {row['n_accelerators']} chips is not modelled")
    if model is None or chip is None:
        return _skip(base, f"no preset for {row['model']} on {row['accelerator']}")
    kwargs = dict(hw=chip, model=model, batch=int(row["batch_size"]), weight_dtype=dtype, group_size=group,
                  kv_dtype=row["kv_precision"], tp=int(tp.group(1)), stack=stack.name)
    prompt = int(row["prompt_len"])
    if tp.group(1) != "1":
        label += f", TP {tp.group(1)}"
    if int(row["batch_size"]) > 1:
        label += f", batch {row['batch_size']}"
    generated = re.search(r"\d+", row["output_len_or_kv_ctx"])
    if row["phase"] == "decode" or whole(row):
        if generated is None:
            raise ValueError(f"row {row['id']}: output_len_or_kv_ctx {row['output_len_or_kv_ctx']!r} gives no length")
        new = int(generated.group())
    if whole(row):  # the prompt's prefill, then every generated token's decode step
        return Case(base.id, base.source, f"{label} {prompt}+{new}", base.measured_ms,
                    {**kwargs, "phase": "generate", "prompt": prompt, "generate": new}, "generation", base.settings,
                    base.stack)
    if row["phase"] == "decode":
        # A median over steps whose KV cache grows ("KV 2..129"): the step at the middle length.
        # gpt-fast attends over its whole static cache: prompt plus the generated tokens.
        kv = re.search(r"KV (\d+)\.\.(\d+)", row["output_len_or_kv_ctx"])
        context = (int(kv.group(1)) + int(kv.group(2))) // 2 if kv else prompt + new
        return Case(base.id, base.source, f"{label}, KV {context}" if kv else label, base.measured_ms,
                    {**kwargs, "phase": "decode", "context": context}, "decode step", base.settings, base.stack)
    if stack.first_token_by_decode and prompt > 1:
        return Case(base.id, base.source, f"{label} {prompt}", base.measured_ms,
                    {**kwargs, "phase": "generate", "prompt": prompt - 1, "generate": 1},
                    BY_DECODE, base.settings, base.stack)
    return Case(base.id, base.source, f"{label} {prompt}", base.measured_ms,
                {**kwargs, "phase": "prefill", "prompt": prompt}, "prefill", base.settings, base.stack)


def _skip(base: Case, why: str) -> Case:
    return Case(base.id, base.source, base.label, base.measured_ms, None, why, base.settings, base.stack)


DATA = Path(__file__).resolve().parent / "data" / "calibration.csv"  # shipped in the repository


def load(path: Path = DATA) -> list[Case]:
    with path.open(newline="") as fh:
        return [case(row) for row in csv.DictReader(fh)]


def repository(source: str) -> str:
    """A source as the tables name it: its GitHub repository, else its address."""
    parts = source.split("github.com/")
    return "/".join(parts[1].split("/")[:2]) if len(parts) > 1 else source


def fitted(cases: list[Case]) -> list[Case]:
    """The cases of the sources the presets are fitted on (``FITTED_ON``)."""
    return [c for c in cases if repository(c.source) in FITTED_ON]


def simulate_ms(c: Case, overrides: dict[str, str] | None = None) -> float:
    """The row's step time in ms, with hardware fields overridden (``{"compute.kernel_efficiency": "0.8"}``)
    on top of those the row was measured with (its power cap)."""
    if c.kwargs is None:
        raise ValueError(f"row {c.id} is skipped: {c.why}")
    result = api.simulate(**c.kwargs, set={**dict(c.settings), **(overrides or {})})
    return result.summary.step_time_s * 1e3
