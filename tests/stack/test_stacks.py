"""Runtime stacks as declared data: every shipped stack loads, says where its values come from, and
composes, overrides and defaults as a chip file does."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from memsim import hardware
from memsim.core.errors import ConfigError
from memsim.mapping import fabric, system
from memsim.run import api
from memsim.stack import IDEAL, default_for, load_stack, presets
from memsim.stack.loader import stack_estimates
from memsim.stack.reference import reference

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "configs" / "stacks"
HARNESSES = ROOT / "memsim" / "validation" / "data" / "stacks"
FIELD = re.compile(r"^\s*(?:- )?(?P<key>\w+):(?P<value>[^#]*?)\s*(?:#\s?(?P<comment>.*))?$")
FILES = sorted([*STACKS.glob("*.yaml"), *HARNESSES.glob("*.yaml")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_stack_loads_and_every_value_says_where_it_comes_from(path):
    """Each value line of a stack file carries a comment (its source or why), unless it names a choice
    the comment of its section gives; an estimate is written with its range and says why."""
    stack = load_stack(str(path))[0]
    assert stack.name == path.stem and stack.description
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = FIELD.match(line)
        if not m or line.lstrip().startswith("#") or not m["value"] or m["key"] in ("name", "description", "base"):
            continue
        if m["value"].startswith("{estimate"):
            assert "estimate" in (m["comment"] or ""), f"{path.name}:{n}: an estimate says why"
    for e in stack_estimates(stack):
        assert e.low <= e.value <= e.high and e.path.startswith("stack.")


def test_the_presets_are_the_files():
    assert presets() == sorted(p.stem for p in STACKS.glob("*.yaml"))


def test_a_stack_starts_from_several_bases_in_order():
    """vLLM's profile is NCCL's collectives and its own custom all-reduce, the custom kernels first."""
    vllm = load_stack("vllm")[0]
    names = [c.name for c in vllm.collectives]
    assert set(names) == {"nccl-ring-ll", "nccl-ring-simple", "custom-one-shot", "custom-two-shot"}
    assert {c.name for c in vllm.collective("allreduce", 64 << 10, 8)} == {"custom-one-shot", "custom-two-shot"}
    assert {c.name for c in vllm.collective("allreduce", 64 << 20, 8)} == {"nccl-ring-ll", "nccl-ring-simple"}
    assert {c.name for c in vllm.collective("allreduce", 64 << 10, 16)} == {"nccl-ring-ll", "nccl-ring-simple"}


def test_a_set_path_under_stack_changes_one_field_of_the_stack_and_errors_name_it():
    chip = hardware.load("h100-sxm")
    stack, _, _ = api.load_stack("vllm", chip, {"stack.dispatch.launch": "5us",
                                                "stack.collectives.custom-one-shot.call": "1us"})
    assert stack.dispatch.launch_ps == 5_000_000
    assert next(c for c in stack.collectives if c.name == "custom-one-shot").call_ps == 1_000_000
    with pytest.raises(ConfigError) as info:
        api.load_stack("vllm", chip, {"stack.dispatch.lunch": "5us"})
    assert info.value.field == "stack.dispatch.lunch" and "unknown field" in str(info.value)
    with pytest.raises(ConfigError) as info:
        api.simulate("h100-sxm", "gpt2", context=16, stack="no-such-stack")
    assert "no such preset" in str(info.value)


def test_the_default_stack_is_the_vendors_then_the_familys():
    assert default_for("gpu") == "vllm" and default_for("cpu") == "pytorch-cpu" and default_for("wafer") == IDEAL.name
    assert hardware.load("wormhole-n150").stack == "tt-metal-traced"
    assert api.simulate("wormhole-n150", "gpt2", context=16, sensitivity=0).summary.stack.name == "tt-metal-traced"
    s = api.simulate("h100-sxm", "gpt2", context=16, sensitivity=0).summary.stack
    assert s.name == "vllm" and s.default is True and s.launch == "graph"
    assert api.simulate("h100-sxm", "gpt2", context=16, sensitivity=0, stack="ideal").summary.stack.default is False


def test_the_field_reference_is_current():
    assert (ROOT / "docs" / "stack-fields.md").read_text() == reference()


def test_a_library_whose_channels_are_routes_gives_a_member_that_sends_to_one_peer_one_channel():
    impl = next(c for c in load_stack("tt-ccl")[0].collectives if c.name == "tt-reduce-scatter")
    assert impl.channel == "routes" and impl.max_channels == 2
    assert impl.channel_rate(4 << 20) == impl.channel_rate(4 << 20, routes=2) == 2 * impl.channel_bandwidth
    assert impl.channel_rate(4 << 20, routes=1) == impl.channel_bandwidth
    assert impl.channel_rate(64 << 10, routes=2) == impl.channel_bandwidth  # a small message: one direction
    blocks = replace(impl, channel="blocks")  # NCCL's kind: blocks share a route
    assert blocks.channel_rate(4 << 20, routes=1) == 2 * impl.channel_bandwidth
    # two chips: each sends to its one peer a round, so one channel; a ring of 8 sends both ways
    chip = hardware.load("wormhole-n150")
    for ranks, slower in ((2, True), (8, False)):
        built, members = fabric.fabric(chip, ranks), list(range(ranks))
        as_routes, as_blocks = (system.implementation_seconds(chip, c, "reduce_scatter", 4 << 20, members, built)
                                for c in (impl, blocks))
        assert (as_routes > as_blocks) is slower and as_routes >= as_blocks
