"""Hostile cases (issue 20): what a careless or malicious user does besides mutating a file's structure.

- ``bomb``: a YAML alias bomb (billion laughs) under any scalar field of a hardware, system or
  sweep file; memsim must answer within the case's time and memory.
- ``long``: a quantity of hundreds of thousands of characters under any scalar field, in a
  file or through ``--set``.
- ``extreme``: every scalar of a preset in turn set to the extremes of its unit kind (the kind
  its field declares: bytes, bandwidth, time, FLOP/s, power, energy, frequency, plain numbers);
  a run must give a finite answer or one line.
- ``output``: outputs aimed at what memsim must not replace: a FIFO, a link to a file or
  folder, the command's own input, an input kept inside ``--out``. Each must be unchanged after.
- ``signal``: a run whose earlier output exists is sent SIGINT or SIGTERM at a drawn moment after
  memsim's console has loaded; the output must then be the old run or the new one, whole, and the
  next run must succeed.
- ``edit``: a swept hardware file is rewritten while the sweep runs; the sweep must finish on one
  content or stop with one line, and a resume after the edit must be refused in one line.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from memsim.sweep.store import digest

from . import vocab
from .inputs import Case, Seeds, set_paths
from .mutate import leaves, replaced
from .run import TIMEOUT, Limits, Outcome, judge

FIFO, LINK = "<fifo>", "<link>"  # special entries of Case.files: a named pipe; ("<link>", target) a symlink
BOMB = ("[&a [lol, lol, lol, lol, lol, lol, lol, lol, lol], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a], "
        "&c [*b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, *c, *c, *c, *c, *c, *c, *c, *c], "
        "&e [*d, *d, *d, *d, *d, *d, *d, *d, *d], &f [*e, *e, *e, *e, *e, *e, *e, *e, *e], "
        "&g [*f, *f, *f, *f, *f, *f, *f, *f, *f], &h [*g, *g, *g, *g, *g, *g, *g, *g, *g], "
        "&i [*h, *h, *h, *h, *h, *h, *h, *h, *h]]")
PLACEHOLDER = "__hostile__"
LONG = ("1" * 300_000 + " GB", "1." + "0" * 300_000 + "1 TB/s", "1e" + "9" * 300_000 + " s", "9" * 300_000,
        "1" + " " * 300_000 + "GB", "." * 300_000, "1" + "e1" * 150_000, "-" * 300_000 + "1 W")
EXTREMES = {  # by the unit kind of memsim's field declarations (spec_field), plain numbers as "number"
    "bandwidth": ("1e-30 B/s", "1 B/s", "999999 B/s", "1e30 B/s", "1e29 PB/s", "0.5 B/s"),
    "flops": ("1e-30 FLOP/s", "1 FLOP/s", "1e30 FLOP/s", "0.5 TFLOP/s"),
    "bit_energy": ("1e-30 pJ/bit", "1e30 pJ/bit", "0.001 fJ/bit"),
    "flop_energy": ("1e-30 pJ/FLOP", "1e30 pJ/FLOP"),
    "frequency": ("1e-30 Hz", "1 Hz", "1e30 GHz"),
    "power": ("1e-30 W", "1 mW", "1e30 W"),
    "time": ("1e-30 s", "0.4 ps", "1 ps", "1e15 s", "1e30 s"),
    "bytes": ("1 B", "0.5 B", "1e-30 GB", "1e30 B", "1e9 PiB"),
    "number": (5e-324, 1e-300, 1e-15, 0.999999999, 1e300, 2 ** 63, 2 ** 64 + 1, 10 ** 30),
}
NUMBER = {"count": "number", "ratio": "number", "ratios": "number", "ops": "number", "rates": "flops",
          "energies": "flop_energy"}  # memsim's units whose extremes are another's


def extreme_kind(unit: str) -> str:
    """The key of ``EXTREMES`` for a field of memsim's ``unit``; '' for names, choices and text."""
    kind = NUMBER.get(unit, unit)
    return kind if kind in EXTREMES else ""


def _yaml_with(tree: Any, path: tuple, text: str) -> bytes:
    """``tree`` as YAML with the scalar at ``path`` written as the raw YAML ``text``."""
    dumped = yaml.safe_dump(replaced(tree, path, PLACEHOLDER), sort_keys=False, width=10**9)
    return dumped.replace(PLACEHOLDER, text, 1).encode()


def _targets(s: Seeds) -> list[tuple[str, Any, list[str]]]:
    """The files a hostile value can go into: (file name, tree, the command that reads it)."""
    run = ["run", "--model", "gpt2", "--context", "16", "--sensitivity", "0", "--out", "{DIR}/out"]
    out = [(f"hw:{name}", tree, ["run", "--hw", "{DIR}/f.yaml", *run[1:]]) for name, tree in sorted(s.hw_trees.items())]
    out += [(f"system:{name}", tree, [*run, "--hw", name, "--system", "{DIR}/f.yaml"])
            for name, tree in s.systems[:3]]
    sweep = {"model": "gpt2", "context": 16, "set": {"batch": [1, 2], "hbm.bandwidth": ["3 TB/s"]}}
    out.append(("sweep", sweep, ["sweep", "--sweep", "{DIR}/f.yaml", "--out", "{DIR}/out", "--workers", "1",
                                 "--no-progress"]))
    return out


@st.composite
def bomb_case(draw, s: Seeds) -> Case:
    name, tree, command = draw(st.sampled_from(_targets(s)))
    path = draw(st.sampled_from(leaves(tree)))
    return Case("bomb", {"f.yaml": _yaml_with(tree, path, BOMB)}, [command], [f"{name}: alias bomb at {path}"],
                max_points=8)


@st.composite
def long_case(draw, s: Seeds) -> Case:
    text = draw(st.sampled_from(LONG))
    name, tree, command = draw(st.sampled_from(_targets(s)))
    if draw(st.booleans()) and name.startswith("hw:"):  # through --set, a quantity of the preset
        field = draw(st.sampled_from([p for p, f in set_paths(tree).items() if extreme_kind(f.unit)]))
        return Case("long", {}, [["run", "--hw", name[3:], "--model", "gpt2", "--context", "16", "--sensitivity", "0",
                                  "--set", f"{field}={text}", "--out", "{DIR}/out"]],
                    [f"--set {field}=<{len(text)} characters>"])
    path = draw(st.sampled_from(leaves(tree)))
    return Case("long", {"f.yaml": _yaml_with(tree, path, json.dumps(text))}, [command],
                [f"{name}: {len(text)} characters at {path}"], max_points=8)


@st.composite
def extreme_case(draw, s: Seeds) -> Case:
    name = draw(st.sampled_from(sorted(s.hw_trees)))
    tree = s.hw_trees[name]
    typed = [(p, extreme_kind(vocab.hardware_unit(p))) for p in leaves(tree)]
    typed = [(p, k) for p, k in typed if k]
    path, kind = draw(st.sampled_from(typed))
    value = draw(st.sampled_from(EXTREMES[kind]))
    data = yaml.safe_dump(replaced(tree, path, value), sort_keys=False).encode()
    return Case("extreme", {"f.yaml": data}, [["run", "--hw", "{DIR}/f.yaml", "--model", "gpt2", "--context", "16",
                                               "--sensitivity", "0", "--out", "{DIR}/out"]],
                [f"{name}: {path} ({kind}) = {value!r}"])


@st.composite
def output_case(draw, s: Seeds) -> Case:
    files: dict[str, Any] = {"kept.txt": b"the user's own file\n", "m.json": json.dumps(s.models["tiny-gpt2"]).encode(),
                             "dir/inner.txt": b"inside a folder\n"}
    target = draw(st.sampled_from(("fifo", "link-file", "link-dir", "own-input", "input-in-out", "link-out")))
    trace = ["trace", "--model", "{DIR}/m.json", "--context", "16", "-o"]
    run = ["run", "--model", "{DIR}/m.json", "--context", "16", "--sensitivity", "0", "--out"]
    if target == "fifo":
        files["pipe"] = FIFO
        command, keep = [*trace, "{DIR}/pipe"], ["pipe"]
    elif target == "link-file":
        files["link"] = (LINK, "kept.txt")
        command, keep = [*trace, "{DIR}/link"], ["link", "kept.txt"]
    elif target == "link-dir":
        files["link"] = (LINK, "dir")
        command, keep = draw(st.sampled_from(([*trace, "{DIR}/link"], [*run, "{DIR}/link"]))), ["link", "dir/inner.txt"]
    elif target == "own-input":
        command, keep = [*trace, "{DIR}/m.json"], ["m.json"]
    elif target == "input-in-out":
        files["out/hw.yaml"] = s.hw["h100-sxm"]
        command, keep = ["run", "--hw", "{DIR}/out/hw.yaml", *run[1:], "{DIR}/out"], ["out/hw.yaml"]
    else:
        files["link"] = (LINK, "dir")
        command, keep = ["sweep", "--model", "{DIR}/m.json", "--context", "16", "--set", "batch=1,2", "--workers", "1",
                         "--no-progress", "--out", "{DIR}/link"], ["link", "dir/inner.txt"]
    return Case("output", files, [command], [f"output at {target}"], max_points=8, keep=keep)


@st.composite
def signal_case(draw, s: Seeds) -> Case:
    which = draw(st.sampled_from(("SIGINT", "SIGTERM")))
    # Counted from when memsim's console has loaded (``_console``): before it, a Ctrl-C is Python's
    # own (a traceback) and no code of memsim's can catch it yet.
    delay = draw(st.sampled_from((0.3, 0.5, 0.8, 1.2, 1.6, 2.0, 2.5)))
    command = ["run", "--model", "gpt2", "--context", "16", "--sensitivity", "0", "--out", "{DIR}/out"]
    return Case("signal", {}, [command], [f"{which} after {delay} s"], action=("signal", which, delay))


@st.composite
def edit_case(draw, s: Seeds) -> Case:
    delay = draw(st.sampled_from((0.2, 1.0, 2.0, 3.0, 4.0)))
    hw = s.hw["h100-sxm"]
    sweep = ["sweep", "--hw", "{DIR}/hw.yaml", "--model", "gpt2", "--context", "16", "--set", "batch=1,2,3,4,5,6",
             "--workers", "1", "--no-progress", "--out", "{DIR}/out"]
    return Case("edit", {"hw.yaml": hw}, [sweep], [f"hw.yaml rewritten after {delay} s"], action=("edit", delay))


def write_special(folder: Path, name: str, data: Any) -> bool:
    """Make a FIFO or a link (``Case.files``); False for a plain entry."""
    if data == FIFO:
        os.mkfifo(folder / name)
        return True
    if isinstance(data, tuple) and data[0] == LINK:
        os.symlink(data[1], folder / name)
        return True
    return False


def state(path: Path) -> tuple:
    """What a kept entry is: its kind, where a link points, its bytes."""
    if path.is_symlink():
        return ("link", os.readlink(path), state(path.resolve()) if path.exists() else None)
    if not path.exists():
        return ("missing",)
    if path.is_fifo():
        return ("fifo",)
    if path.is_dir():
        return ("dir", sorted(p.name for p in path.iterdir()))
    return ("file", path.read_bytes())


# The console script in a process of its own (ARGV: the fd to tell, CPU seconds or 0, memsim's
# arguments). It writes a byte to the fd once memsim's console is loaded: from then on a Ctrl-C is
# memsim's to handle, and the drawn moments of the actions count from there, not from a start
# that a loaded machine makes slow.
CONSOLE = ("import os, resource, sys; cpu = int(sys.argv[2]); "
           "cpu and resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1)); "
           "from memsim.cli.console import entry; os.write(int(sys.argv[1]), b'.'); "
           "sys.argv = ['memsim', *sys.argv[3:]]; entry()")


def _console(args: list[str], folder: Path, limits: Limits) -> subprocess.Popen:
    """``memsim ARGS`` in ``folder``, started: returns once memsim's console has loaded (or the
    process has ended, or ``limits.wall_s`` passed)."""
    ready, tell = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", CONSOLE, str(tell), str(math.ceil(limits.cpu_s)), *args],
                                cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(tell,))
        os.close(tell)
        tell = -1
        select.select([ready], [], [], limits.wall_s or None)
    finally:
        os.close(ready)
        if tell >= 0:
            os.close(tell)
    return proc


def _finish(proc: subprocess.Popen, limits: Limits) -> Outcome:
    try:
        out, err = proc.communicate(timeout=limits.wall_s or None)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Outcome(rc=None, stdout=out, stderr=err)
    return Outcome(rc=proc.returncode, stdout=out, stderr=err)


def _timeout(o: Outcome, what: str) -> list[tuple[str, str]]:
    """A command of an action that outlived the wall-clock limit: a class of its own (``TIMEOUT``)."""
    return [(f"{TIMEOUT}: {what}", o.stderr[-300:])] if o.rc is None else []


def _whole_run(out: Path) -> str:
    """'' when ``out`` holds a whole run, else what is wrong."""
    missing = [n for n in vocab.run_outputs() if not (out / n).is_file()]
    if missing:
        return f"lacks {', '.join(missing)}"
    try:
        json.loads((out / "summary.json").read_text())
    except ValueError as exc:
        return f"summary.json does not parse: {exc}"
    return ""


def run_signal(case: Case, folder: Path, limits: Limits) -> list[tuple[str, str]]:
    """The run once whole, then again with a signal at the drawn moment, then once more."""
    _, which, delay = case.action
    args = [a.replace("{DIR}", str(folder)) for a in case.steps[0]]
    out = folder / "out"
    first = _finish(_console(args, folder, limits), limits)
    if first.rc != 0:
        return _timeout(first, "signal: the first run") or [("signal: the first run failed", first.stderr[-300:])]
    proc = _console(args, folder, limits)
    time.sleep(delay)
    proc.send_signal(getattr(signal, which))
    o = _finish(proc, limits)
    if o.rc is None:  # killed by the fuzzer, whatever it left behind
        return _timeout(o, f"signal: no exit after {which}")
    failures = []
    if which == "SIGINT" and o.rc not in (0, 130):
        failures.append((f"signal: exit {o.rc} after SIGINT", o.stderr[-300:]))
    elif which == "SIGINT" and o.rc == 130 and o.stderr.strip() != "memsim: interrupted":
        failures.append(("signal: SIGINT did not print one line", o.stderr[-300:]))
    broken = _whole_run(out)
    if broken and not any(out.parent.glob(".out.*")):  # a run set aside is put back by the next one
        failures.append((f"signal: {which} left --out without a whole run", broken))
    last = _finish(_console(args, folder, limits), limits)
    if last.rc is None:
        failures += _timeout(last, f"signal: the run after {which}")
    elif last.rc != 0 or _whole_run(out):
        failures.append((f"signal: the run after {which} failed", last.stderr[-300:] or _whole_run(out)))
    return failures


def run_edit(case: Case, folder: Path, limits: Limits) -> list[tuple[str, str]]:
    """The sweep with its hardware file rewritten partway; then the same sweep again (a resume)."""
    _, delay = case.action
    args = [a.replace("{DIR}", str(folder)) for a in case.steps[0]]
    proc = _console(args, folder, limits)
    time.sleep(delay)
    hw = folder / "hw.yaml"
    hw.write_text(hw.read_text().replace("efficiency: 0.", "efficiency: 0.5", 1) + "\n# edited\n")
    o = _finish(proc, limits)
    failures = _timeout(o, "edit: the sweep") or [
        (f"edit: {c}", d) for c, d in judge(args, o, folder, set())
        if not c.startswith("--out written despite")]  # a stopped sweep keeps the points it finished
    manifest = folder / "out" / "sweep.json"
    if o.rc in (0, 2) and manifest.is_file():  # a resume: refused unless the sweep recorded the edited content
        recorded = digest(hw.read_bytes()) in manifest.read_text()
        resumed = _finish(_console(args, folder, limits), limits)
        lines = resumed.stderr.strip().splitlines()
        if resumed.rc is None:
            failures += _timeout(resumed, "edit: the resume")
        elif recorded and resumed.rc != 0:
            failures.append(("edit: a resume of a sweep that recorded the edited file failed",
                             f"exit {resumed.rc}: {resumed.stderr[-300:]}"))
        elif not recorded and (resumed.rc != 2 or len(lines) != 1 or not lines[0].startswith("memsim: error: ")):
            failures.append(("edit: a resume after the edit was not refused in one line",
                             f"exit {resumed.rc}: {resumed.stderr[-300:]}"))
    return failures


ACTIONS = {"signal": run_signal, "edit": run_edit}
KINDS = {"bomb": bomb_case, "long": long_case, "extreme": extreme_case, "output": output_case,
         "signal": signal_case, "edit": edit_case}
