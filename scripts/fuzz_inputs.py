"""The inputs scripts/fuzz.py mutates: valid seeds of every loader and one Hypothesis strategy per kind.

A ``Case`` is the files to write into a fresh folder and the memsim commands to run there;
``{DIR}`` in an argument stands for that folder. Each strategy draws a seed, mutates it with
``fuzz_mutate`` and returns a ``Case`` whose ``recipe`` says what was done.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fuzz_binary
import yaml
from fuzz_mutate import document
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
HW_DIR, MODEL_DIR = ROOT / "configs" / "hardware", ROOT / "configs" / "models"


@dataclass
class Case:
    kind: str
    files: dict[str, bytes | str]  # name -> content, or DIRECTORY / MISSING
    steps: list[list[str]]  # memsim commands, run in order while they succeed
    recipe: list[str]
    max_points: int = 0  # sweeps: skip the case when the sweep would have more points than this
    roundtrip: bool = False  # a successful run's OUT/hardware.yaml must load back to the same step time
    keep: list[str] = field(default_factory=list)  # entries the commands must leave as they were
    action: tuple = ()  # a hostile action run instead of the steps (fuzz_hostile.ACTIONS): its name, arguments


TINY = {
    "tiny-gpt2": {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 1, "vocab_size": 256,
                  "n_positions": 128},
    "tiny-llama": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256,
                   "max_position_embeddings": 512},
    "tiny-moe": {"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256, "num_local_experts": 4,
                 "num_experts_per_tok": 2, "max_position_embeddings": 512},
    "tiny-falcon": {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
                    "vocab_size": 256, "new_decoder_architecture": False},
}
MODEL_KEYS = ["model_type", "hidden_size", "n_embd", "num_attention_heads", "n_head", "head_dim",
              "num_key_value_heads", "num_kv_heads", "num_hidden_layers", "n_layer", "intermediate_size", "n_inner",
              "ffn_hidden_size", "vocab_size", "max_position_embeddings", "n_positions", "tie_word_embeddings",
              "num_local_experts", "num_experts_per_tok", "new_decoder_architecture", "bogus"]
MODEL_VALUES = ("gpt2", "bert", "gptj", "llama", "mistral", "mixtral", "qwen2", "falcon", "t5", 1, 2, 3, 7, 64,
                127, 4096, 2 ** 31, 2 ** 53 + 1, 10 ** 7)
TRACE_KEYS = ["schema", "version", "meta", "tensors", "ops", "name", "shape", "dtype", "class", "bytes", "kind",
              "layer", "flops", "inputs", "tensor", "outputs", "dims", "deps", "m", "n", "k", "batch", "heads",
              "kv_heads", "q_len", "kv_len", "head_dim", "causal", "pairs", "elements", "ranks", "tp", "bogus"]
TRACE_VALUES = ("matmul", "attention", "elementwise", "norm", "embedding", "compute", "allreduce", "allgather",
                "reduce_scatter", "alltoall", "weight", "kv", "activation", "fp8", "int4", "fp32", "int3",
                "memsim-trace", 2, 0, -1)
SYSTEM_VALUES = ("switch", "ring", "mesh2d", "torus2d", "hypercube", "auto", "tree", "bogus", "nvlink", "pcie",
                 "ici", "xgmi", "io", "fabric", "0 s", "1 us", "-1 us", "1 GB")
RANGES = ("1..4:x2", "1..4:+1", "4..1:x2", "1..4:x1", "1..4:x0.5", "1..4", "1..4:", "1..4:y2", "1KiB..64KiB:x4",
          "1e400..1:x2", "nan..1:x2", "1..inf:x2", "0..4:x2", "1..2:+1e-300", "-4..-1:x2", "16MiB..32MiB:x2",
          "2TB/s..4TB/s:+1TB/s", "1..100000:+1", "1us..2us:x2", "1..2:x2,3", ",", "a..b:x2")
SWEEP_KEYS = ["hw", "model", "phase", "batch", "context", "prompt", "generate", "weight_dtype", "kv_dtype",
              "weight-dtype", "group_size", "tp", "pp", "microbatches", "trace", "samples", "system", "ep", "set",
              "sram.capacity", "compute.units", "execution.prefetch_depth", "levels.hbm.capacity", "system.topology",
              "hbm.bandwidth", "bogus"]
SWEEPS = [
    {"model": "gpt2", "phase": "decode", "context": 32, "set": {"batch": [1, 2]}},
    {"model": "gpt2", "context": 16, "set": {"sram.capacity": "16MiB..32MiB:x2"}},
    {"hw": "h100-sxm", "model": "gpt2", "context": 16, "set": {"hbm.bandwidth": ["2TB/s", "3.35TB/s"]}},
    {"model": "gpt2", "context": 16, "weight-dtype": "int8", "set": {"kv_dtype": ["bf16", "int8"]}},
    {"trace": "trace.json", "set": {"hw": ["h100-sxm", "sn40l"]}},
    {"model": "gpt2", "phase": "generate", "prompt": 16, "generate": 4, "samples": 2, "set": {"batch": "1..2:+1"}},
    {"model": "gpt2", "context": 16, "tp": 2, "system": "system.yaml", "set": {"system.collective": ["ring", "tree"]}},
]
MODEL_HW = ("h100-sxm", "h100-sxm", "h100-sxm", "wse-3", "sn40l", "xeon-gold-6242", "tpu-v4")
TRACE_HW = ("h100-sxm", "h100-sxm", "sn40l", "wse-3", "xeon-gold-6242")


@dataclass(repr=False)
class Seeds:
    """Valid inputs of every kind, built once before the cases are drawn."""

    def __repr__(self) -> str:  # Hypothesis prints the strategy's arguments in its messages
        return f"Seeds({len(self.hw)} presets, {len(self.models)} models, {len(self.traces)} traces)"

    hw: dict[str, bytes] = field(default_factory=dict)  # preset -> its YAML, comments and all
    hw_trees: dict[str, Any] = field(default_factory=dict)
    hw_keys: list[str] = field(default_factory=list)
    hw_values: tuple = ()
    models: dict[str, dict] = field(default_factory=dict)
    traces: dict[str, dict] = field(default_factory=dict)
    systems: list[tuple[str, dict]] = field(default_factory=list)
    onnx: dict[str, bytes] = field(default_factory=dict)
    chakra: dict[str, bytes] = field(default_factory=dict)


def build_seeds(work: Path, cli: Callable[[list[str]], int]) -> Seeds:
    """Read the presets and models, and write the seed traces with ``cli`` (memsim's own commands)."""
    s = Seeds()
    keys, names = set(), set()
    for path in sorted(HW_DIR.glob("*.yaml")):
        s.hw[path.stem] = path.read_bytes()
        tree = yaml.safe_load(s.hw[path.stem])
        s.hw_trees[path.stem] = tree
        keys |= _keys(tree)
        names |= {e["name"] for e in tree.get("levels", []) + tree.get("links", [])}
        if tree.get("system") and (path.stem, tree["system"]) not in s.systems:
            s.systems.append((path.stem, tree["system"]))
    s.hw_keys = sorted(keys | {"bogus", "bandwith", "holds", "via", "scope"}, key=str)
    s.hw_values = (*sorted(names), "gpu", "wafer", "rdu", "cpu", "tpu", "unit", "chip", "l2", "hbm", "weight", "kv",
                   "activation", "compute", "copy", "comm", "branch", "layers", "none")
    for name in ("gpt2", "llama-3.2-1b", "qwen2.5-7b", "mixtral-8x7b", "bert-base"):
        config = json.loads((MODEL_DIR / f"{name}.json").read_text())  # only what memsim reads: denser mutations
        s.models[name] = {k: v for k, v in config.items() if k in MODEL_KEYS}
    s.models.update(copy.deepcopy(TINY))
    work.mkdir(parents=True, exist_ok=True)
    for name, cfg in TINY.items():
        (work / f"{name}.json").write_text(json.dumps(cfg))
    traces = {"gpt2-decode": ["--model", "gpt2", "--phase", "decode", "--context", "64"],
              "tiny-gpt2-decode": ["--model", str(work / "tiny-gpt2.json"), "--context", "16"],
              "tiny-llama-prefill": ["--model", str(work / "tiny-llama.json"), "--phase", "prefill", "--prompt", "8"],
              "tiny-moe-decode": ["--model", str(work / "tiny-moe.json"), "--context", "16", "--batch", "2"]}
    for name, args in traces.items():
        out = work / f"{name}.json"
        if cli(["trace", *args, "-o", str(out)]) != 0:
            raise RuntimeError(f"seed trace {name} failed: memsim trace {' '.join(args)}")
        s.traces[name] = json.loads(out.read_text())
    s.onnx = fuzz_binary.onnx_seeds()
    s.chakra = fuzz_binary.chakra_seeds()
    if "ops" in s.chakra:
        (work / "et.0.et").write_bytes(s.chakra["ops"])
        if cli(["import", "chakra", str(work / "et.0.et"), "-o", str(work / "chakra.json"), "--ranks", "4"]) == 0:
            s.traces["chakra-ranks4"] = json.loads((work / "chakra.json").read_text())
    return s


def _keys(tree: Any) -> set:
    if isinstance(tree, dict):
        return set(tree) | {k for v in tree.values() for k in _keys(v)}
    if isinstance(tree, list):
        return {k for v in tree for k in _keys(v)}
    return set()


def _text(tree: Any) -> bytes:
    return json.dumps(tree, indent=1).encode()


@st.composite
def hw_case(draw, s: Seeds) -> Case:
    name = draw(st.sampled_from(sorted(s.hw)))
    data, recipe = draw(document(s.hw_trees[name], "yaml", s.hw_keys, s.hw[name], s.hw_values))
    return Case("hw", {"hw.yaml": data},
                [["run", "--hw", "{DIR}/hw.yaml", "--model", "gpt2", "--context", "64", "--out", "{DIR}/out"]],
                [f"seed configs/hardware/{name}.yaml", *recipe], roundtrip=True)


@st.composite
def model_case(draw, s: Seeds) -> Case:
    name = draw(st.sampled_from(sorted(s.models)))
    data, recipe = draw(document(s.models[name], "json", MODEL_KEYS, extra=MODEL_VALUES))
    hw = draw(st.sampled_from(MODEL_HW))
    shape = ["--phase", "prefill", "--prompt", "16"] if name == "bert-base" else ["--context", "64"]
    return Case("model", {"model.json": data},
                [["run", "--hw", hw, "--model", "{DIR}/model.json", *shape, "--out", "{DIR}/out"]],
                [f"seed {name}", *recipe])


@st.composite
def trace_case(draw, s: Seeds) -> Case:
    name = draw(st.sampled_from(sorted(s.traces)))
    tree, recipe = copy.deepcopy(s.traces[name]), [f"seed trace {name}"]
    if draw(st.integers(0, 3)) == 0:
        tree, what = draw(trace_semantics(tree))
        recipe.append(what)
    data, more = draw(document(tree, "json", TRACE_KEYS, extra=TRACE_VALUES))
    hw = draw(st.sampled_from(TRACE_HW))
    return Case("trace", {"trace.json": data},
                [["run", "--hw", hw, "--trace", "{DIR}/trace.json", "--out", "{DIR}/out"]], recipe + more)


@st.composite
def trace_semantics(draw, tree: dict) -> tuple[dict, str]:
    """Graph-level damage the field mutations rarely make: cycles, two producers, dangling names."""
    ops = tree["ops"]
    i, j = sorted(draw(st.lists(st.integers(0, len(ops) - 1), min_size=2, max_size=2)))
    a, b = ops[i], ops[j]
    how = draw(st.sampled_from(("cycle", "self_dep", "two_producers", "dangling_input", "dangling_dep",
                                "output_is_input", "dup_op", "dup_tensor")))
    if how == "cycle":
        a["deps"] = [*a.get("deps", []), b["name"]]
    elif how == "self_dep":
        a["deps"] = [*a.get("deps", []), a["name"]]
    elif how == "two_producers" and a["outputs"]:
        b["outputs"] = [*b["outputs"], a["outputs"][0]]
    elif how == "dangling_input" and a["inputs"]:
        a["inputs"][0]["tensor"] = "ghost"
    elif how == "dangling_dep":
        a["deps"] = ["nope"]
    elif how == "output_is_input" and a["inputs"]:
        a["outputs"] = [*a["outputs"], a["inputs"][0]["tensor"]]
    elif how == "dup_op":
        b["name"] = a["name"]
    else:
        tree["tensors"].append(copy.deepcopy(tree["tensors"][0]))
    return tree, f"{how}: ops {i} ({a['name']}) and {j} ({b['name']})"


@st.composite
def system_case(draw, s: Seeds) -> Case:
    preset, tree = s.systems[draw(st.integers(0, len(s.systems) - 1))]
    data, recipe = draw(document(tree, "yaml", ["topology", "link", "collective", "step_latency", "bogus", "name"],
                                 extra=SYSTEM_VALUES))
    hw = preset if draw(st.integers(0, 3)) else draw(st.sampled_from(sorted(s.hw)))
    tp = draw(st.sampled_from(("1", "2", "2", "4")))
    return Case("system", {"system.yaml": data},
                [["run", "--hw", hw, "--model", "gpt2", "--context", "64", "--tp", tp, "--system",
                  "{DIR}/system.yaml", "--out", "{DIR}/out"]],
                [f"seed system of {preset}", f"--hw {hw} --tp {tp}", *recipe], roundtrip=True)


@st.composite
def sweep_case(draw, s: Seeds) -> Case:
    tree = SWEEPS[draw(st.integers(0, len(SWEEPS) - 1))]
    data, recipe = draw(document(tree, "yaml", SWEEP_KEYS, extra=RANGES + MODEL_VALUES[:8]))
    files = {"sweep.yaml": data, "trace.json": _text(s.traces["tiny-gpt2-decode"]),
             "system.yaml": yaml.safe_dump(s.systems[0][1]).encode()}
    return Case("sweep", files, [["sweep", "--sweep", "{DIR}/sweep.yaml", "--out", "{DIR}/out", "--workers", "1",
                                  "--no-progress"]], [f"seed {json.dumps(tree)}", *recipe], max_points=8)


INTS = ("0", "-1", "1", "2", "3", "4", "8", "16", "64", "-2147483648", "9223372036854775808", "1" + "0" * 30, "1.5",
        "abc", "", "1e3", " 2", "0x10", "٣", "+1", "1_000")
DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp32", "int3", "BF16", "", "fp4", "nf4", "bf16 ")
SETS = ("sram.capacity=64MiB", "hbm.bandwidth=4.8TB/s", "compute.units=66", "compute.peak.bf16=500TFLOP/s",
        "execution.prefetch_depth=1", "execution.attention=unfused", "levels.hbm.capacity=40GB", "sram=1", "=1",
        "nosuch.x=1", "levels.hbm.capacity=", "compute.peak.bf16=nan TFLOP/s", "levels.0.capacity=1GB",
        "execution.streams=compute,bogus", "system.topology=mesh2d", "compute.units=1e400", ".", "a..b=1",
        "sram.capacity.x=1", "compute=1", "levels=1", "name=", "family=wafer", "hbm.capacity=0 B",
        "hbm.bandwidth=0 TB/s", "hbm.latency=-1 ns", "hbm.efficiency=2", "hbm.efficiency=0", "hbm.channels=0",
        "execution.kv_split=-1", "execution.comm_overlap=65", "execution.unit_tile=0", "execution.fabric=nvlink",
        "execution.stage_from=hbm", "execution.stage_into=ddr", "execution.pipeline=layers",
        "execution.pipeline_chunks=0", "ddr.via=ghost", "sram.scope=unit", "compute.dtype_efficiency.bf16=1.5",
        "system.collective=bogus", "system.link=pcie", "system.step_latency=1 s", "nvlink.bandwidth=1 B/s",
        "execution.dequant.int4=-1", "execution.weight_prefetch=1000000", "compute.vector_peak=1e999999999 TFLOP/s",
        "batch=1,2", "batch=1..4:x2", "sram.capacity=1KiB..1MiB:x2", "context=0", "hw=h100-sxm,wse-3", "phase=bogus",
        "model=gpt2,nope", "tp=1,2", "levels.hbm.capacity=1..2:+1")
OPTIONS: dict[str, tuple] = {
    "--hw": ("h100-sxm", "wse-3", "sn40l", "groq-lpu", "", "nope", "{DIR}", "/dev/null", "{DIR}/missing.yaml",
             "H100-SXM", "h100-sxm.yaml"),
    "--model": ("gpt2", "llama-3.2-1b", "bert-base", "mixtral-8x7b", "", "nope", "{DIR}/missing.json", "{DIR}",
                "/dev/null", "gpt2.json", "GPT2", "{DIR}/moe.json"),
    "--trace": ("{DIR}/trace.json", "{DIR}/missing.json", "{DIR}", "", "/dev/null"),
    "--phase": ("decode", "prefill", "generate", "DECODE", "", "train"),
    "--weight-dtype": DTYPES, "--kv-dtype": DTYPES, "--set": SETS,
    "--system": ("{DIR}/system.yaml", "{DIR}/missing.yaml", "{DIR}", ""),
    "--out": ("{DIR}/out", "{DIR}/afile", "{DIR}/afile/sub", "", ".", "{DIR}/a/b/c", "{DIR}/out/"),
    "-o": ("{DIR}/t.json", "{DIR}/afile/t.json", "{DIR}", "", "{DIR}/new/dir/t.json", "{DIR}/afile"),
    "--dim": ("seq=4", "seq=0", "seq=-1", "seq=", "=4", "seq=x", "seq=99999999999999999999", "seq=٣", "other=2"),
    "--workers": ("1", "-1", "0", "2", "x"),
    **{k: INTS for k in ("--batch", "--context", "--prompt", "--generate", "--tp", "--pp", "--microbatches",
                         "--chips", "--group-size", "--ranks", "--tokens")},
    # No large valid counts: --samples K with --generate N simulates min(K, N) steps, slow by design.
    "--samples": ("0", "-1", "1", "2", "3", "8", "abc", "", "1.5", "٣", "+1"),
}
FLAGS = ("--help", "--bogus", "--", "-x", "", "extra", "--out=", "--batch=", "=", "--version")
_STEP = ("--model", "--phase", "--batch", "--context", "--prompt", "--weight-dtype", "--kv-dtype", "--group-size")
_SYSTEM = ("--hw", "--trace", "--generate", "--samples", "--tp", "--pp", "--microbatches", "--system", "--set")
# The options and flags each command takes: most added options are then ones it knows.
COMMANDS = {
    "run": (_STEP + _SYSTEM + ("--chips", "--out"), ("--ep", "--perfetto", "--no-fast-forward")),
    "sweep": (_STEP + _SYSTEM + ("--out", "--workers"), ("--ep", "--keep", "--no-progress")),
    "trace": ((*_STEP, "-o"), ()),
    "import": (("-o", "--dim", "--ranks"), ()),
    "list": ((), ()),
}
OUT = "{DIR}/out"


def cli_bases(s: Seeds) -> dict[str, list[str]]:
    bases = {
        "run": ["run", "--hw", "h100-sxm", "--model", "gpt2", "--context", "64", "--out", OUT],
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
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("value", "value", "drop", "add", "add", "dup", "flag")))
        opts = [i for i, a in enumerate(args) if a in OPTIONS and i + 1 < len(args)]
        if op in ("value", "drop", "dup") and opts:
            i = opts[draw(st.integers(0, len(opts) - 1))]
            opt, value = args[i], draw(st.sampled_from(OPTIONS[args[i]]))
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
            flag = draw(st.sampled_from(COMMANDS[args[0]][1] + FLAGS[:3] if COMMANDS[args[0]][1] and
                                        draw(st.booleans()) else FLAGS))
            at = draw(st.integers(1, len(args)))
            args.insert(at, flag)
            recipe.append(f"insert {flag!r} at {at}")
        else:
            known = COMMANDS[args[0]][0]
            opt = draw(st.sampled_from(known if known and draw(st.integers(0, 4)) else sorted(OPTIONS)))
            value = draw(st.sampled_from(OPTIONS[opt]))
            args += [opt, value]
            recipe.append(f"add {opt} {value!r}")
    files = {"trace.json": _text(s.traces["tiny-gpt2-decode"]), "moe.json": json.dumps(TINY["tiny-moe"]).encode(),
             "system.yaml": yaml.safe_dump(s.systems[0][1]).encode(), "afile": b"not a folder\n"}
    if s.onnx:
        files["m.onnx"] = s.onnx["symbolic"]
    if s.chakra:
        files["et.0.et"] = s.chakra["ops"]
    steps = [args]
    if base == "trace":
        steps.append(["run", "--trace", "{DIR}/t.json"])
    return Case("cli", files, steps, recipe, max_points=8)


@st.composite
def onnx_case(draw, s: Seeds) -> Case:
    name = draw(st.sampled_from(sorted(s.onnx)))
    data, recipe = draw(fuzz_binary.onnx_mutant(s.onnx[name]))
    dims = ["--dim", "seq=4"] if name == "symbolic" else []
    return Case("onnx", {"m.onnx": data}, [["import", "onnx", "{DIR}/m.onnx", "-o", "{DIR}/t.json", *dims],
                                           ["run", "--trace", "{DIR}/t.json", "--out", OUT]],
                [f"seed onnx {name}", *recipe])


@st.composite
def chakra_case(draw, s: Seeds) -> Case:
    if s.chakra:
        name = draw(st.sampled_from(sorted(s.chakra)))
        data, recipe = draw(fuzz_binary.chakra_mutant(s.chakra[name]))
        recipe = [f"seed chakra {name}", *recipe]
    else:  # no protobuf schema to mutate with: garbage must still give one line
        data = draw(st.binary(max_size=256))
        recipe = ["random bytes (mlc-chakra is not installed)"]
    ranks = draw(st.sampled_from(("4", "4", "4", "1", "2", "0", "-1", "3")))
    return Case("chakra", {"et.0.et": data},
                [["import", "chakra", "{DIR}/et.0.et", "-o", "{DIR}/t.json", "--ranks", ranks],
                 ["run", "--trace", "{DIR}/t.json", "--out", OUT]], [*recipe, f"--ranks {ranks}"])


KINDS: dict[str, Callable] = {"hw": hw_case, "model": model_case, "trace": trace_case, "sweep": sweep_case,
                              "system": system_case, "cli": cli_case, "onnx": onnx_case, "chakra": chakra_case}
__all__ = ["KINDS", "Case", "Seeds", "build_seeds"]
