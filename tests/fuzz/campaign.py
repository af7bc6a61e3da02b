"""Fuzz memsim's loaders and command line: mutate valid inputs and check the error contract.

Hypothesis mutates valid seeds of every input memsim reads (hardware YAML, model JSON, trace
JSON, sweep YAML, system YAML, command-line arguments, ONNX and Chakra files) and each case
runs memsim's console entry point in a fresh folder. A case passes when it exits 0, or exits 2
with exactly one line ``memsim: error: ...`` on stderr and leaves nothing in ``--out``. A fixed
``--seed`` draws the same cases again.

    python -m tests.fuzz --cases 10000 --seed 0 --report fuzz_report.jsonl
    python -m tests.fuzz --replay fuzz_report.jsonl     # run the failing cases of a report again

Exit code 1 when a case failed. A command past ``--case-cpu`` CPU seconds fails its case; one
past ``--case-timeout`` wall-clock seconds fails it too, unless ``--timeouts count`` (a loaded
machine, as in CI): then it is counted and listed apart, and is no verdict.
"""
from __future__ import annotations

import argparse
import base64
import dataclasses
import gc
import json
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import HypothesisException

from . import commands, hostile, inputs, run
from .inputs import Case, Seeds, build_seeds
from .mutate import DIRECTORY, MISSING

STEP_TIME = "step time"
KINDS = {"hw": inputs.hw_case, "model": inputs.model_case, "trace": inputs.trace_case, "sweep": inputs.sweep_case,
         "system": inputs.system_case, "cli": commands.cli_case, "onnx": inputs.onnx_case,
         "chakra": inputs.chakra_case, **hostile.KINDS}  # the mutated inputs, then the hostile acts


class _Budget(BaseException):
    """Stops Hypothesis when the time budget is spent."""


class Fuzzer:
    """Runs cases and keeps the tally. ``count_timeouts``: a case stopped only by the wall clock
    is counted in ``timed_out`` and listed, not failed (its CPU time is judged by ``limits``)."""

    def __init__(self, work: Path, limits: run.Limits, isolate: str, report: Path | None,
                 count_timeouts: bool = False) -> None:
        self.work, self.limits, self.isolate, self.count_timeouts = work, limits, isolate, count_timeouts
        self.report = report.open("w") if report else None
        self.cases: Counter = Counter()
        self.failed: Counter = Counter()
        self.skipped: Counter = Counter()
        self.timed_out: Counter = Counter()
        self.timeouts: list[str] = []  # "kind#case: class" of each case counted in timed_out
        self.seconds: Counter = Counter()
        self.exit0: Counter = Counter()  # cases whose (first) command exited 0
        self.classes: Counter = Counter()  # failure class -> failing cases
        self.first: dict[str, str] = {}  # failure class -> first case that showed it
        self.kind_classes: dict[str, set] = defaultdict(set)

    def run_args(self, args: list[str], folder: Path, max_points: int = 0) -> run.Outcome:
        execute = run.run_forked if self.isolate == "fork" else run.run_inprocess
        return execute(args, folder, self.limits, max_points)

    def run_case(self, case: Case) -> list[tuple[str, str, int, run.Outcome]]:
        """Write the case's files into a fresh folder and run its steps; returns its failures."""
        folder = Path(tempfile.mkdtemp(prefix=f"{case.kind}-", dir=self.work))
        try:
            _write_files(folder, case.files)
            kept = {name: hostile.state(folder / name) for name in case.keep}
            if case.action:  # three runs of a fresh interpreter: at least a minute of wall clock
                limits = dataclasses.replace(self.limits, wall_s=max(self.limits.wall_s, 60))
                found = hostile.ACTIONS[case.action[0]](case, folder, limits)
                self.exit0[case.kind] += not found
                return [(c, d, 0, run.Outcome(rc=0)) for c, d in found]
            failures = self._steps(case, folder)
            failures += [(f"{case.kind}: {name} was changed", f"{kept[name]!r:.150} -> {now!r:.150}", 0,
                          run.Outcome()) for name in case.keep
                         if (now := hostile.state(folder / name)) != kept[name]]
            return failures
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _steps(self, case: Case, folder: Path) -> list:
        """Run the case's steps while they succeed (and the round trip after them); their failures."""
        failures: list = []
        first_stdout = ""
        for i, template in enumerate(case.steps):
            args = [a.replace("{DIR}", str(folder)) for a in template]
            before = run.snapshot(folder)
            outcome = self.run_args(args, folder, case.max_points)
            if i == 0:
                self.exit0[case.kind] += outcome.rc == 0 and not outcome.skipped
            if outcome.skipped:
                return [("skipped", outcome.skipped, i, outcome)]
            failures += [(c, d, i, outcome) for c, d in run.judge(args, outcome, folder, before)]
            if outcome.rc != 0 or failures:
                break
            first_stdout = first_stdout or outcome.stdout
        else:
            if case.roundtrip:
                failures += self._roundtrip(case.steps[0], folder, first_stdout)
        return failures

    def _roundtrip(self, template: list[str], folder: Path, stdout: str) -> list:
        """The resolved OUT/hardware.yaml loads back to the same step time."""
        saved = folder / "out" / "hardware.yaml"
        if not saved.is_file():
            return []
        args, i = [], 0
        while i < len(template):
            a = template[i]
            if a in ("--system", "--out"):
                i += 2
                continue
            args.append(str(saved) if i > 0 and template[i - 1] == "--hw" else a.replace("{DIR}", str(folder)))
            i += 1
        o = self.run_args(args, folder)
        failures = [(c, d, 1, o) for c, d in run.judge(args, o, folder, run.snapshot(folder))]
        if o.rc != 0 and not failures:
            failures.append(("OUT/hardware.yaml does not load back", o.stderr.strip()[:300], 1, o))
        elif o.rc == 0 and _line(o.stdout, STEP_TIME) != _line(stdout, STEP_TIME):
            failures.append(("OUT/hardware.yaml loads back to another step time",
                             f"{_line(stdout, STEP_TIME)} -> {_line(o.stdout, STEP_TIME)}", 1, o))
        return failures

    def record(self, case: Case, index: int) -> list:
        start = time.monotonic()
        failures = self.run_case(case)
        self.seconds[case.kind] += time.monotonic() - start
        self.cases[case.kind] += 1
        if failures and failures[0][0] == "skipped":
            self.skipped[case.kind] += 1
            return []
        waited = [f for f in failures if f[0].startswith(run.TIMEOUT)] if self.count_timeouts else []
        if waited and len(waited) == len(failures):  # slow on this machine, maybe: no verdict
            self.timed_out[case.kind] += 1
            self.timeouts.append(f"{case.kind}#{index}: {waited[0][0]}")
            print(f"{self.timeouts[-1]} (counted apart, not a failure)", flush=True)
            return []
        failures = [f for f in failures if f not in waited]
        if not failures:
            return []
        self.failed[case.kind] += 1
        classes = list(dict.fromkeys(c for c, *_ in failures))
        for c in classes:
            self.classes[c] += 1
            self.first.setdefault(c, f"{case.kind}#{index}")
            self.kind_classes[case.kind].add(c)
        if self.report:
            _, detail, step, o = failures[0]
            self.report.write(json.dumps({
                "kind": case.kind, "case": index, "class": classes[0], "classes": classes, "detail": detail,
                "step": step, "steps": case.steps, "exit_code": o.rc, "stderr_tail": o.stderr[-2000:],
                "exception": o.exception or (o.swallowed[0] if o.swallowed else None), "recipe": case.recipe,
                "max_points": case.max_points, "roundtrip": case.roundtrip, "keep": case.keep,
                "action": list(case.action),
                "files": {name: _encode(data) for name, data in case.files.items()},
            }) + "\n")
            self.report.flush()
        return classes

    def campaign(self, seeds: Seeds, kinds: list[str], total: int, seed: int, budget: float) -> None:
        start = time.monotonic()
        shares = {k: total // len(kinds) + (i < total % len(kinds)) for i, k in enumerate(kinds)}
        for position, kind in enumerate(kinds):
            left = budget - (time.monotonic() - start) if budget else 0
            kind_deadline = time.monotonic() + left / (len(kinds) - position) if budget else float("inf")
            strategy = KINDS[kind](seeds)
            for attempt in range(8):  # Hypothesis may run out of distinct cases before the share
                wanted = shares[kind] - self.cases[kind]
                if wanted <= 0 or time.monotonic() > kind_deadline:
                    break
                self._drive(kind, strategy, wanted, seed * 1_000_003 + position * 1009 + attempt, kind_deadline)
            self._line(kind, self.cases[kind], self.exit0[kind], self.failed[kind], len(self.kind_classes[kind]),
                       self.seconds[kind], f"  {self.timed_out[kind]} timed out" if self.timed_out[kind] else "")

    @staticmethod
    def _line(name: str, cases: int, exit0: int, failed: int, classes: int, seconds: float, extra: str = "") -> None:
        print(f"{name:<7} {cases:6d} cases  {exit0:5d} exit 0  {failed:5d} failed  {classes:3d} classes  "
              f"{seconds:7.1f} s{extra}", flush=True)

    def _drive(self, kind: str, strategy, wanted: int, seed: int, deadline: float) -> None:
        @settings(max_examples=wanted, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), derandomize=False, print_blob=False)
        @hypothesis_seed(seed)
        @given(strategy)
        def one(case: Case) -> None:
            if time.monotonic() > deadline:
                raise _Budget
            self.record(case, self.cases[kind])

        try:
            one()
        except _Budget:
            pass
        except HypothesisException as exc:  # a fault of the fuzzer, not of memsim: say so and go on
            print(f"{kind}: Hypothesis stopped after {self.cases[kind]} cases: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0]}", flush=True)

    def summary(self, seconds: float) -> int:
        n, bad = sum(self.cases.values()), sum(self.failed.values())
        skipped = sum(self.skipped.values())
        rate = f" ({n / max(seconds, 1e-9):.1f} cases/s)" + (f"; {skipped} skipped (sweeps too big)" if skipped else "")
        if self.timeouts:
            rate += f"; {len(self.timeouts)} past --case-timeout, counted apart"
        self._line("total", n, sum(self.exit0.values()), bad, len(self.classes), seconds, rate)
        if self.classes:
            print("failure classes (failing cases, first case):")
            for c, count in self.classes.most_common():
                print(f"  {count:6d}  {c}  [{self.first[c]}]")
        return 1 if bad else 0


def _line(text: str, prefix: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip().startswith(prefix)), "")


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _encode(data) -> dict:
    if data is DIRECTORY or data is MISSING:
        return {"special": "directory" if data is DIRECTORY else "missing"}
    if data == hostile.FIFO:
        return {"special": "fifo"}
    if isinstance(data, tuple):
        return {"special": "link", "target": data[1]}
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def _decode(entry: dict):
    if "special" in entry:
        special = entry["special"]
        if special in ("fifo", "link"):
            return hostile.FIFO if special == "fifo" else (hostile.LINK, entry["target"])
        return DIRECTORY if special == "directory" else MISSING
    return entry["text"].encode("utf-8", "surrogatepass") if "text" in entry else base64.b64decode(entry["base64"])


def _write_files(folder: Path, files: dict) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if hostile.write_special(folder, name, data):
            continue
        if data is DIRECTORY:
            (folder / name).mkdir()
        elif data is not MISSING:
            (folder / name).write_bytes(data)


def warm_up(seeds: Seeds, folder: Path) -> None:
    """Run valid commands of every kind here first, so that each forked case finds memsim's lazy
    imports done and its caches filled instead of paying for them again."""
    folder.mkdir()
    (folder / "sweep.yaml").write_text("model: gpt2\ncontext: 16\nset: {batch: [1, 2]}\n")
    runs = [["run", "--hw", hw, "--model", "gpt2", "--context", "64", "--out", f"out-{hw}"]
            for hw in dict.fromkeys(seeds.by_family)]  # the default preset and one of each family
    runs += [["run", "--model", "gpt2", "--phase", "generate", "--prompt", "16", "--generate", "4", "--samples",
                  "2", "--tp", "2"],
                 ["sweep", "--sweep", "sweep.yaml", "--out", "sweep", "--workers", "1", "--no-progress"]]
    for name, data in (("m.onnx", seeds.onnx.get("symbolic")), ("et.0.et", seeds.chakra.get("ops"))):
        if data:
            (folder / name).write_bytes(data)
            kind = "onnx" if name.endswith("onnx") else "chakra"
            runs += [["import", kind, name, "-o", f"{kind}.json", *(["--dim", "seq=4"] if kind == "onnx" else [])],
                         ["run", "--trace", f"{kind}.json"]]
    for args in runs:
        outcome = run.run_inprocess(args, folder, run.Limits(wall_s=600))
        if outcome.rc != 0:
            print(f"warm-up failed (exit {outcome.rc}): memsim {' '.join(args)}: {outcome.stderr.strip()[-300:]}")


def replay(fuzzer: Fuzzer, report: Path) -> int:
    """Run the cases of a report again; prints which still fail."""
    records = [json.loads(line) for line in report.read_text().split("\n") if line.strip()]
    still = 0
    for rec in records:
        case = Case(rec["kind"], {k: _decode(v) for k, v in rec["files"].items()}, rec["steps"], rec["recipe"],
                    rec.get("max_points", 0), rec.get("roundtrip", False), rec.get("keep", []),
                    tuple(rec.get("action", ())))
        classes = fuzzer.record(case, rec["case"])
        still += bool(classes)
        print(f"{rec['kind']}#{rec['case']}: {'; '.join(classes) if classes else 'passes now'}")
    print(f"{still} of {len(records)} cases still fail")
    return 1 if still else 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=800, help="cases in all, spread evenly over the kinds")
    p.add_argument("--seed", type=int, default=0, help="the same seed draws the same cases")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, from {','.join(KINDS)}")
    p.add_argument("--report", type=Path, help="write each failing case (JSONL) here")
    p.add_argument("--time-budget", type=float, default=0, help="seconds for the campaign (0: no limit), "
                                                                 "shared evenly by the kinds")
    p.add_argument("--case-timeout", type=float, default=10, help="wall-clock seconds one command may run "
                                                                  "(0: no limit)")
    p.add_argument("--case-cpu", type=float, default=0, help="CPU seconds one command may use (0: no limit)")
    p.add_argument("--timeouts", choices=("fail", "count"), default="fail",
                   help="a command past --case-timeout: fail its case, or count it apart (on a loaded machine, "
                        "with --case-cpu to judge hangs)")
    p.add_argument("--memory-gb", type=float, default=4, help="address space a case may add (0: no limit)")
    p.add_argument("--isolate", choices=("fork", "none"), default="fork",
                   help="fork: each command in a forked child (survives crashes and hangs); none: in this process")
    p.add_argument("--replay", type=Path, help="run the cases of a --report file again instead")
    p.add_argument("--workdir", type=Path, help="folder for the case folders (default: a temporary one)")
    args = p.parse_args(argv)
    unknown = set(args.kinds.split(",")) - set(KINDS)
    if unknown:
        p.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = Path(tempfile.mkdtemp(prefix="memsim-fuzz-", dir=args.workdir))
    memory = int(_vm_size() + args.memory_gb * 2 ** 30) if args.memory_gb else 0
    limits = run.Limits(wall_s=args.case_timeout, cpu_s=args.case_cpu, memory_bytes=memory)
    fuzzer = Fuzzer(work, limits, args.isolate, None if args.replay else args.report, args.timeouts == "count")
    try:
        if args.replay:
            return replay(fuzzer, args.replay)
        seeds = build_seeds(work / "seeds", lambda a: run.run_inprocess(a, work, run.Limits(wall_s=600)).rc)
        kinds = [k for k in args.kinds.split(",") if k != "onnx" or seeds.onnx]
        if len(kinds) < len(args.kinds.split(",")):
            print("onnx is not installed: no ONNX cases")
        warm_up(seeds, work / "warm")
        gc.freeze()  # forked children then share the parent's pages instead of copying them
        start = time.monotonic()
        fuzzer.campaign(seeds, kinds, args.cases, args.seed, args.time_budget)
        return fuzzer.summary(time.monotonic() - start)
    finally:
        gc.unfreeze()
        if fuzzer.report:
            fuzzer.report.close()
        shutil.rmtree(work, ignore_errors=True)
