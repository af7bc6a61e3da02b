"""The ``cli`` kind: memsim's command lines, each a valid base with values changed, options
dropped, repeated or added, and stray flags inserted.

Which options and flags each command takes, and the type and choices of each, are read from
memsim's click commands (``vocab``); the invalid values beside the valid ones are written here.
"""
from __future__ import annotations

import json

import yaml
from hypothesis import strategies as st

from . import vocab
from .hostile import EXTREMES, extreme_kind
from .inputs import OUT, SEED_MODELS, TINY, Case, Seeds, as_json

INTS = ("0", "-1", "1", "2", "3", "4", "8", "16", "64", "-2147483648", "9223372036854775808", "1" + "0" * 30, "1.5",
        "abc", "", "1e3", " 2", "0x10", "٣", "+1", "1_000")
# Counts where a large valid one is slow by design: --samples K with --generate N simulates
# min(K, N) steps; --sensitivity N reruns the step twice for each of N estimates.
SMALL_INTS = ("0", "-1", "1", "2", "3", "abc", "", "1.5", "٣", "+1", "9223372036854775808")
FLOATS = ("0", "0.5", "0.99", "1", "-0.1", "nan", "inf", "1e400", "abc", "")
PATHS = ("", "x", "{DIR}", "{DIR}/missing", "/dev/null", "{DIR}/afile", "{DIR}/afile/sub")
DTYPES = (*vocab.dtypes(), "int3", "BF16", "", "fp4", "nf4", "bf16 ")
# --set items that are not a declared field at a value: bad syntax, unknown paths, sweep ranges.
SET_SYNTAX = ("sram=1", "=1", "nosuch.x=1", "levels.hbm.capacity=", "levels.0.capacity=1GB", ".", "a..b=1",
              "sram.capacity.x=1", "compute=1", "levels=1", "name=", "execution.streams=compute,bogus",
              "ddr.via=ghost", "compute.dtype_efficiency.bf16=1.5", "execution.dequant.int4=-1",
              "compute.vector_peak=1e999999999 TFLOP/s", "compute.peak.bf16=nan TFLOP/s", "system.collective=bogus",
              "batch=1,2", "batch=1..4:x2", "sram.capacity=1KiB..1MiB:x2", "context=0", "hw=h100-sxm,wse-3",
              "phase=bogus", "model=gpt2,nope", "tp=1,2", "levels.hbm.capacity=1..2:+1")
OPTIONS: dict[str, tuple] = {
    "--model": (*SEED_MODELS, "", "nope", "{DIR}/missing.json", "{DIR}", "/dev/null", "gpt2.json", "GPT2",
                "{DIR}/moe.json"),
    "--trace": ("{DIR}/trace.json", "{DIR}/missing.json", "{DIR}", "", "/dev/null"),
    "--phase": (*vocab.phases(), "DECODE", "", "train"),
    "--weight-dtype": DTYPES, "--kv-dtype": DTYPES,
    "--system": ("{DIR}/system.yaml", "{DIR}/missing.yaml", "{DIR}", ""),
    "--out": ("{DIR}/out", "{DIR}/afile", "{DIR}/afile/sub", "", ".", "{DIR}/a/b/c", "{DIR}/out/"),
    "-o": ("{DIR}/t.json", "{DIR}/afile/t.json", "{DIR}", "", "{DIR}/new/dir/t.json", "{DIR}/afile"),
    "--dim": ("seq=4", "seq=0", "seq=-1", "seq=", "=4", "seq=x", "seq=99999999999999999999", "seq=٣", "other=2"),
    "--workers": ("1", "-1", "0", "2", "x"),
    **{k: INTS for k in ("--batch", "--context", "--prompt", "--generate", "--tp", "--pp", "--microbatches",
                         "--chips", "--group-size", "--ranks", "--tokens")},
    "--samples": (*SMALL_INTS, "8"), "--sensitivity": (*SMALL_INTS, "101"),
    "--draft": ("self", "gpt2", "", "nope", "{DIR}/missing.json", "{DIR}/moe.json"),
    "--scheduler": ("", "x", "tcp://", "tcp://host:0", "tcp://host:99999"),  # none that would wait for a cluster
}
OPTIONS["--output"] = OPTIONS["-o"]
FLAGS = ("--help", "--bogus", "--", "-x", "", "extra", "--out=", "--batch=", "=", "--version")


def option_values(opt: str, s: Seeds) -> st.SearchStrategy[str]:
    """Values of ``opt``: its own list above, else what its declared type suggests."""
    if opt == "--hw":
        default = vocab.default_preset()
        return st.sampled_from((*dict.fromkeys(s.by_family), "", "nope", "{DIR}", "/dev/null", "{DIR}/missing.yaml",
                                default.upper(), f"{default}.yaml"))
    if opt == "--set":
        return st.one_of(st.sampled_from(SET_SYNTAX), set_item(s))
    if opt in OPTIONS:
        return st.sampled_from(OPTIONS[opt])
    kind, choices = vocab.option_types().get(opt, ("text", ()))
    if choices:
        return st.sampled_from((*choices, "", choices[0].upper(), "bogus"))
    return st.sampled_from({"integer": SMALL_INTS, "float": FLOATS}.get(kind, PATHS))


def set_item(s: Seeds) -> st.SearchStrategy[str]:
    """``PATH=VALUE``: a declared field of the default preset at one of its choices or at an
    extreme of its unit kind."""
    def values(path: str) -> st.SearchStrategy[str]:
        field = s.set_paths[path]
        if field.choices:
            return st.sampled_from((*field.choices, "bogus", ""))
        kind = extreme_kind(field.unit)
        return st.sampled_from((*map(str, EXTREMES[kind]), "", "nan") if kind else ("", "x", "bogus"))

    return st.sampled_from(tuple(s.set_paths)).flatmap(lambda path: values(path).map(lambda v: f"{path}={v}"))


def command_of(args: list[str]) -> str:
    """``run``, or ``import onnx``: the key of ``vocab.commands()`` that ``args`` call."""
    known = vocab.commands()
    return next((k for k in (" ".join(args[:2]), args[0] if args else "") if k in known), "")


def cli_bases(s: Seeds) -> dict[str, list[str]]:
    bases = {
        "run": ["run", "--hw", vocab.default_preset(), "--model", "gpt2", "--context", "64", "--out", OUT],
        "moe": ["run", "--model", "{DIR}/moe.json", "--context", "16", "--tp", "2", "--ep", "--out", OUT],
        "generate": ["run", "--model", "gpt2", "--phase", "generate", "--prompt", "16", "--generate", "4",
                     "--samples", "2", "--out", OUT],
        "prefill": ["run", "--hw", "wse-3", "--model", "gpt2", "--phase", "prefill", "--prompt", "32", "--out", OUT],
        "pp": ["run", "--model", "gpt2", "--context", "64", "--pp", "2", "--microbatches", "2", "--out", OUT],
        "trace-run": ["run", "--trace", "{DIR}/trace.json", "--out", OUT],
        "trace": ["trace", "--model", "gpt2", "--context", "64", "-o", "{DIR}/t.json"],
        "sweep": ["sweep", "--model", "gpt2", "--context", "16", "--set", "batch=1,2", "--out", OUT, "--workers", "1",
                  "--no-progress"],
        "list": ["list", "hw"],
    }
    if s.onnx:
        bases["onnx"] = ["import", "onnx", "{DIR}/m.onnx", "-o", "{DIR}/t.json", "--dim", "seq=4"]
    if s.chakra:
        bases["chakra"] = ["import", "chakra", "{DIR}/et.0.et", "-o", "{DIR}/t.json", "--ranks", "4"]
    return bases


@st.composite
def cli_case(draw, s: Seeds) -> Case:
    bases = cli_bases(s)
    base = draw(st.sampled_from(sorted(bases)))
    args, recipe = list(bases[base]), [f"base {base}"]
    every = sorted({o for options, _ in vocab.commands().values() for o in options})
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("value", "value", "drop", "add", "add", "dup", "flag")))
        opts = [i for i, a in enumerate(args) if a in vocab.option_types() and i + 1 < len(args)]
        options, flags = vocab.commands().get(command_of(args), ((), ()))
        if op in ("value", "drop", "dup") and opts:
            i = opts[draw(st.integers(0, len(opts) - 1))]
            opt, value = args[i], draw(option_values(args[i], s))
            if op == "value":
                args[i + 1] = value
                recipe.append(f"{opt} {value!r}")
            elif op == "drop":
                del args[i:i + 2]
                recipe.append(f"drop {opt}")
            else:
                args += [opt, value]
                recipe.append(f"repeat {opt} {value!r}")
        elif op == "flag":
            flag = draw(st.sampled_from(flags + FLAGS[:3] if flags and draw(st.booleans()) else FLAGS))
            at = draw(st.integers(1, len(args)))
            args.insert(at, flag)
            recipe.append(f"insert {flag!r} at {at}")
        else:
            opt = draw(st.sampled_from(options if options and draw(st.integers(0, 4)) else every))
            value = draw(option_values(opt, s))
            args += [opt, value]
            recipe.append(f"add {opt} {value!r}")
    files = {"trace.json": as_json(s.traces["tiny-gpt2-decode"]), "moe.json": json.dumps(TINY["tiny-moe"]).encode(),
             "system.yaml": yaml.safe_dump(s.systems[0][1]).encode(), "afile": b"not a folder\n"}
    if s.onnx:
        files["m.onnx"] = s.onnx["symbolic"]
    if s.chakra:
        files["et.0.et"] = s.chakra["ops"]
    steps = [args]
    if base == "trace":
        steps.append(["run", "--trace", "{DIR}/t.json"])
    return Case("cli", files, steps, recipe, max_points=8)
