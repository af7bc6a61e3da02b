"""Shared fixtures: a tiny chip and a tiny model, small enough to simulate chunk by chunk."""
from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings

from memsim import hardware, mapping, workload

# The property tests draw the same examples on every run (a suite that passes passes again, and
# CI checks what the developer checked); MEMSIM_EXAMPLES=N (a deeper search) draws at random. No
# deadline: a test asserts what a run gives, never how long it took (a busy machine is no failure).
settings.register_profile("memsim", derandomize="MEMSIM_EXAMPLES" not in os.environ, deadline=None)
settings.load_profile("memsim")


# CI (.ci/run sets MEMSIM_NO_SKIPS=1) installs every extra and ships every data file, so a test
# that skips there (a missing extra, a missing validation file) is a failure, not a quiet pass.
def _no_skip(report, where: str) -> None:
    """Under MEMSIM_NO_SKIPS, a report that skipped is a failure."""
    if os.environ.get("MEMSIM_NO_SKIPS") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"{where} skipped ({report.longrepr}), and MEMSIM_NO_SKIPS is set: nothing may skip in CI"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _no_skip(outcome.get_result(), item.nodeid)


# A module that skips as it is collected (``pytest.importorskip`` at its top) skips all its tests
# before any runs: the same rule holds for it.
@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _no_skip(outcome.get_result(), f"{collector.nodeid} (as it was collected)")


# A run that spills to host memory on purpose says so; the test asserts it (setup.cfg fails any warning
# a test does not expect).
SPILL = "host memory holds"


def warned(match: str = SPILL, when: bool = True):
    """``pytest.warns`` of a ``MemsimWarning`` the test causes on purpose (matching ``match``); where
    ``when`` is false, the test causes none."""
    from memsim.core.errors import MemsimWarning

    return pytest.warns(MemsimWarning, match=match) if when else contextlib.nullcontext()


TINY_CHIP = """\
name: tiny
family: gpu
stack: ideal  # a hardware fixture: the runtime adds nothing (docs/stacks.md)
compute:
  units: 4
  peak: {bf16: 2 TFLOP/s, fp32: 1 TFLOP/s}
  vector_peak: 1 TFLOP/s
  efficiency: 0.9
  kernel_efficiency: 1  # a fixture's: nothing left to its family's estimates
levels:
  - {name: sram, kind: sram, capacity: 64 KiB, bandwidth: 1 TB/s, latency: 10 ns, channels: 4, scope: chip}
  - {name: hbm, kind: hbm, capacity: 1 GB, bandwidth: 100 GB/s, latency: 200 ns, channels: 2, efficiency: 0.9}
links:
  - {name: pcie, bandwidth: 16 GB/s, latency: 1 us}
execution:
  op_overhead: 1 us
  prefetch_depth: 2
"""

TINY_MODEL = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 512}


@pytest.fixture()
def tiny_chip_path(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_CHIP)
    return path


@pytest.fixture()
def tiny_wafer_path(tmp_path: Path) -> Path:
    """The tiny chip with its weights in SRAM, running its layers as a pipeline of regions."""
    path = tmp_path / "tiny-wafer.yaml"
    path.write_text(TINY_CHIP.replace("capacity: 64 KiB, bandwidth: 1 TB/s, latency: 10 ns, channels: 4,",
                                      "capacity: 4 MiB, bandwidth: 1 TB/s, latency: 10 ns, channels: 4, "
                                      "holds: [weight, kv, activation],")
                    .replace("  prefetch_depth: 2", "  prefetch_depth: 2\n  pipeline: layers"))
    return path


@pytest.fixture()
def tiny_chip(tiny_chip_path: Path) -> hardware.ChipSpec:
    chip, _ = hardware.load_chip(tiny_chip_path)
    return chip


@pytest.fixture()
def tiny_model_path(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-llama.json"
    path.write_text(json.dumps(TINY_MODEL))
    return path


@pytest.fixture(scope="session")
def tiny_model_file(tmp_path_factory) -> str:
    """The tiny model's file, for module- and session-scoped fixtures."""
    path = tmp_path_factory.mktemp("models") / "tiny-llama.json"
    path.write_text(json.dumps(TINY_MODEL))
    return str(path)


@pytest.fixture()
def tiny_graph(tiny_model_path: Path) -> workload.OpGraph:
    return workload.build_step(workload.load_model(tiny_model_path), workload.StepSpec.make("decode", 2, context=32))


@pytest.fixture()
def tiny_plan(tiny_graph, tiny_chip) -> mapping.Plan:
    return mapping.make_plan(tiny_graph, tiny_chip)


def keyword(flags: str) -> str:
    """What a Python caller is told for the command line's ``flags`` (``--draft-k`` -> ``draft_k``)."""
    import re
    from dataclasses import fields

    from memsim.run.runspec import RunSpec, flag

    keywords = {flag(f): f.name for f in fields(RunSpec)}
    return re.sub(r"--[a-z][a-z0-9-]*", lambda m: keywords.get(m.group(0), m.group(0).lstrip("-").replace("-", "_")),
                  flags)


@pytest.fixture(autouse=True)
def _ctrl_c_as_a_shell_gives():
    """Every test starts with Python's own Ctrl-C handler, as a command run from a shell has: the
    console ignores Ctrl-C once its work is done (``memsim/cli/console.py``), a test that runs it in this
    process may leave that behind, and a process started from here would inherit it. Which tests
    share a process depends on how pytest-xdist spreads them."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """The ``long`` tests first: pytest-xdist hands tests out in this order, and a worker that starts one
    last runs on alone for minutes after the other has finished."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: the rest keep their order
