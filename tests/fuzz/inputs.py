"""The inputs the fuzzer mutates: valid seeds of every loader and one Hypothesis strategy per kind.

A ``Case`` is the files to write into a fresh folder and the memsim commands to run there;
``{DIR}`` in an argument stands for that folder. Each strategy draws a seed, mutates it with
``mutate`` and returns a ``Case`` whose ``recipe`` says what was done. Valid names come from
memsim's registries (``vocab``); the invalid ones beside them are written here.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from memsim import hardware
from memsim.core.presets import config_dir

from . import binary, vocab
from .mutate import document, tree_keys

HW_DIR, MODEL_DIR = config_dir("hardware"), config_dir("models")


@dataclass
class Case:
    kind: str
    files: dict[str, bytes | str]  # name -> content, or DIRECTORY / MISSING
    steps: list[list[str]]  # memsim commands, run in order while they succeed
    recipe: list[str]
    max_points: int = 0  # sweeps: skip the case when the sweep would have more points than this
    roundtrip: bool = False  # a successful run's OUT/hardware.yaml must load back to the same step time
    keep: list[str] = field(default_factory=list)  # entries the commands must leave as they were
    action: tuple = ()  # a hostile action run instead of the steps (hostile.ACTIONS): its name, arguments


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
OUT = "{DIR}/out"
SEED_MODELS = ("gpt2", "llama-3.2-1b", "qwen2.5-7b", "mixtral-8x7b", "bert-base")  # shipped configs, one of each shape
MODEL_KEYS = ["model_type", "hidden_size", "n_embd", "num_attention_heads", "n_head", "head_dim",
              "num_key_value_heads", "num_kv_heads", "num_hidden_layers", "n_layer", "intermediate_size", "n_inner",
              "ffn_hidden_size", "vocab_size", "max_position_embeddings", "n_positions", "tie_word_embeddings",
              "num_local_experts", "num_experts_per_tok", "new_decoder_architecture", "bogus"]
MODEL_VALUES = (*vocab.model_types(), "t5", 1, 2, 3, 7, 64, 127, 4096, 2 ** 31, 2 ** 53 + 1, 10 ** 7)
TRACE_VALUES = (*vocab.op_kinds(), *vocab.tensor_classes(), *vocab.dtypes(), "int3", vocab.trace_schema(), 2, 0, -1)
SYSTEM_KEYS = [f.key for f in vocab.hardware_fields() if f.section == "system"] + ["bogus", "name"]
SYSTEM_VALUES = (*vocab.topologies(), "hypercube", *vocab.collectives(), "bogus", "0 s", "1 us", "-1 us", "1 GB")
RANGES = ("1..4:x2", "1..4:+1", "4..1:x2", "1..4:x1", "1..4:x0.5", "1..4", "1..4:", "1..4:y2", "1KiB..64KiB:x4",
          "1e400..1:x2", "nan..1:x2", "1..inf:x2", "0..4:x2", "1..2:+1e-300", "-4..-1:x2", "16MiB..32MiB:x2",
          "2TB/s..4TB/s:+1TB/s", "1..100000:+1", "1us..2us:x2", "1..2:x2,3", ",", "a..b:x2")
SWEEP_KEYS = [*vocab.run_parameters(), "weight-dtype", "set", "bogus"]  # then the hardware fields (Seeds.set_paths)
SWEEPS = [
    {"model": "gpt2", "phase": "decode", "context": 32, "set": {"batch": [1, 2]}},
    {"model": "gpt2", "context": 16, "set": {"sram.capacity": "16MiB..32MiB:x2"}},
    {"hw": "h100-sxm", "model": "gpt2", "context": 16, "set": {"hbm.bandwidth": ["2TB/s", "3.35TB/s"]}},
    {"model": "gpt2", "context": 16, "weight-dtype": "int8", "set": {"kv_dtype": ["bf16", "int8"]}},
    {"trace": "trace.json", "set": {"hw": ["h100-sxm", "sn40l"]}},
    {"model": "gpt2", "phase": "generate", "prompt": 16, "generate": 4, "samples": 2, "set": {"batch": "1..2:+1"}},
    {"model": "gpt2", "context": 16, "tp": 2, "system": "system.yaml", "set": {"system.collective": ["ring", "tree"]}},
]


@dataclass(repr=False)
class Seeds:
    """Valid inputs of every kind, built once before the cases are drawn."""

    def __repr__(self) -> str:  # Hypothesis prints the strategy's arguments in its messages
        return f"Seeds({len(self.hw)} presets, {len(self.models)} models, {len(self.traces)} traces)"

    hw: dict[str, bytes] = field(default_factory=dict)  # preset -> its YAML, comments and all
    hw_trees: dict[str, Any] = field(default_factory=dict)
    hw_keys: list[str] = field(default_factory=list)
    hw_values: tuple = ()
    names: tuple[str, ...] = ()  # of the presets' levels and links
    by_family: tuple[str, ...] = ()  # presets for the runs: the default, and one of each family (by_family)
    set_paths: dict[str, vocab.HardwareField] = field(default_factory=dict)  # as --set spells them, on the default preset
    trace_keys: list[str] = field(default_factory=list)
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
        keys |= tree_keys(tree)
        names |= {e["name"] for e in tree.get("levels", []) + tree.get("links", [])}
        if tree.get("system") and (path.stem, tree["system"]) not in s.systems:
            s.systems.append((path.stem, tree["system"]))
    declared = vocab.hardware_fields()
    s.hw_keys = sorted(keys | {f.key for f in declared} | {"bogus", "bandwith"}, key=str)
    s.names = tuple(sorted(names))
    s.hw_values = (*s.names, *vocab.families(), "tpu", *dict.fromkeys(c for f in declared for c in f.choices))
    s.by_family = by_family()
    s.set_paths = set_paths(s.hw_trees[vocab.default_preset()])
    for name in SEED_MODELS:
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
    s.onnx = binary.onnx_seeds()
    s.chakra = binary.chakra_seeds()
    if "ops" in s.chakra:
        (work / "et.0.et").write_bytes(s.chakra["ops"])
        if cli(["import", "chakra", str(work / "et.0.et"), "-o", str(work / "chakra.json"), "--ranks", "4"]) == 0:
            s.traces["chakra-ranks4"] = json.loads((work / "chakra.json").read_text())
    s.trace_keys = sorted(set().union(*map(tree_keys, s.traces.values())) | {"bogus"}, key=str)
    return s


def by_family() -> tuple[str, ...]:
    """The presets the runs of a case draw from: the default one three times, then the one of
    most memory (the likeliest to hold a model) of each other registered family."""
    chips = {name: hardware.load(name) for name in vocab.presets()}
    memory = {name: sum(lvl.capacity_bytes for lvl in chip.levels) for name, chip in chips.items()}
    default = vocab.default_preset()
    others = [f for f in vocab.families() if f != chips[default].family]
    return (*[default] * 3, *(max((n for n in chips if chips[n].family == f), key=memory.__getitem__)
                              for f in others if any(c.family == f for c in chips.values())))


def set_paths(tree: dict) -> dict[str, vocab.HardwareField]:
    """The declared hardware fields as ``--set`` and a sweep's ``set`` spell them on the preset
    ``tree``: ``compute.units``, and a level's or link's by its name (``hbm.bandwidth``) and as
    ``levels.hbm.bandwidth``."""
    paths = {}
    for f in vocab.hardware_fields():
        if f.unit in ("section", "list"):
            continue
        if f.section in ("levels", "links"):
            for entry in tree.get(f.section, []):
                paths |= {f"{entry['name']}.{f.key}": f, f"{f.section}.{entry['name']}.{f.key}": f}
        else:
            paths[f.path] = f
    return paths


def as_json(tree: Any) -> bytes:
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
    hw = draw(st.sampled_from(s.by_family))
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
    data, more = draw(document(tree, "json", s.trace_keys, extra=TRACE_VALUES))
    hw = draw(st.sampled_from(s.by_family))
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
    data, recipe = draw(document(tree, "yaml", SYSTEM_KEYS, extra=(*SYSTEM_VALUES, *s.names)))
    hw = preset if draw(st.integers(0, 3)) else draw(st.sampled_from(sorted(s.hw)))
    tp = draw(st.sampled_from(("1", "2", "2", "4")))
    return Case("system", {"system.yaml": data},
                [["run", "--hw", hw, "--model", "gpt2", "--context", "64", "--tp", tp, "--system",
                  "{DIR}/system.yaml", "--out", "{DIR}/out"]],
                [f"seed system of {preset}", f"--hw {hw} --tp {tp}", *recipe], roundtrip=True)


@st.composite
def sweep_case(draw, s: Seeds) -> Case:
    tree = SWEEPS[draw(st.integers(0, len(SWEEPS) - 1))]
    data, recipe = draw(document(tree, "yaml", [*SWEEP_KEYS, *s.set_paths], extra=RANGES + vocab.model_types()))
    files = {"sweep.yaml": data, "trace.json": as_json(s.traces["tiny-gpt2-decode"]),
             "system.yaml": yaml.safe_dump(s.systems[0][1]).encode()}
    return Case("sweep", files, [["sweep", "--sweep", "{DIR}/sweep.yaml", "--out", "{DIR}/out", "--workers", "1",
                                  "--no-progress"]], [f"seed {json.dumps(tree)}", *recipe], max_points=8)


@st.composite
def onnx_case(draw, s: Seeds) -> Case:
    name = draw(st.sampled_from(sorted(s.onnx)))
    data, recipe = draw(binary.onnx_mutant(s.onnx[name]))
    dims = ["--dim", "seq=4"] if name == "symbolic" else []
    return Case("onnx", {"m.onnx": data}, [["import", "onnx", "{DIR}/m.onnx", "-o", "{DIR}/t.json", *dims],
                                           ["run", "--trace", "{DIR}/t.json", "--out", OUT]],
                [f"seed onnx {name}", *recipe])


@st.composite
def chakra_case(draw, s: Seeds) -> Case:
    if s.chakra:
        name = draw(st.sampled_from(sorted(s.chakra)))
        data, recipe = draw(binary.chakra_mutant(s.chakra[name]))
        recipe = [f"seed chakra {name}", *recipe]
    else:  # no protobuf schema to mutate with: garbage must still give one line
        data = draw(st.binary(max_size=256))
        recipe = ["random bytes (protobuf is not installed)"]
    ranks = draw(st.sampled_from(("4", "4", "4", "1", "2", "0", "-1", "3")))
    return Case("chakra", {"et.0.et": data},
                [["import", "chakra", "{DIR}/et.0.et", "-o", "{DIR}/t.json", "--ranks", ranks],
                 ["run", "--trace", "{DIR}/t.json", "--out", OUT]], [*recipe, f"--ranks {ranks}"])

