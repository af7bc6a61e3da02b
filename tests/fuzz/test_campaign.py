"""The fuzz harness at work: a fixed-seed slice of the campaign (issue 11), its reproducibility,
its isolation of crashes and hangs, its replay, and the signal action on a real run.

Marked ``fuzz``: ``python -m pytest -m fuzz``. The slice judges a command by the CPU time it
uses, not by the wall clock, so a loaded machine cannot fail it: a command past the (generous)
wall-clock limit is counted apart and reported as a warning.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings

import pytest

from . import campaign, hostile, run
from .campaign import Fuzzer
from .inputs import Case, build_seeds

pytestmark = pytest.mark.fuzz

SLICE = ["--cases", "150", "--seed", "0", "--case-cpu", "60", "--case-timeout", "300", "--timeouts", "count"]


@pytest.mark.long
def test_fixed_seed_slice(tmp_path, capsys):
    report = tmp_path / "report.jsonl"
    code = campaign.main([*SLICE, "--report", str(report)])
    out = capsys.readouterr().out
    assert "total      150 cases" in out
    failures = [json.loads(line) for line in report.read_text().splitlines()]
    assert code == 0, "\n".join(f"{r['kind']}#{r['case']}: {r['class']}: {r['detail'][:200]}" for r in failures)
    slow = [line for line in out.splitlines() if line.endswith("(counted apart, not a failure)")]
    if slow:
        warnings.warn(f"{len(slow)} fuzz commands outlived the wall-clock limit: {'; '.join(slow)}", stacklevel=1)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzz")
    return build_seeds(work / "seeds", lambda a: run.run_inprocess(a, work, run.Limits(wall_s=600)).rc)


def _digests(seeds, seed: int, monkeypatch, tmp_path) -> list[str]:
    """The cases a campaign draws, without running them."""
    drawn = []

    def fake(self, case):
        files = sorted((k, v if isinstance(v, (str, tuple)) else v.hex()) for k, v in case.files.items())
        drawn.append(hashlib.sha256(json.dumps([case.kind, case.steps, case.recipe, files]).encode()).hexdigest())
        return []

    monkeypatch.setattr(Fuzzer, "run_case", fake)
    Fuzzer(tmp_path, run.Limits(wall_s=10), "none", None).campaign(seeds, list(campaign.KINDS), 48, seed, 0)
    return drawn


def test_a_seed_draws_the_same_cases(seeds, monkeypatch, tmp_path):
    first, again = _digests(seeds, 7, monkeypatch, tmp_path), _digests(seeds, 7, monkeypatch, tmp_path)
    assert len(first) == 48 and first == again
    assert _digests(seeds, 8, monkeypatch, tmp_path) != first


def test_a_crash_is_caught_in_the_forked_child(monkeypatch, tmp_path):
    import memsim.run.api

    def boom(*a, **k):
        return 1 / 0

    monkeypatch.setattr(memsim.run.api, "run", boom)
    # Without MEMSIM_DEBUG the CLI's safety net turns a bug into one line, which the judge still fails.
    o = run.run_forked(["run", "--model", "gpt2"], tmp_path, run.Limits(wall_s=60))
    assert o.rc == 2 and "internal error, please report it: ZeroDivisionError" in o.stderr
    [(cls, _)] = run.judge(["run", "--model", "gpt2"], o, tmp_path, set())
    assert cls.startswith("internal error (memsim run)")
    monkeypatch.setenv("MEMSIM_DEBUG", "1")
    o = run.run_forked(["run", "--model", "gpt2"], tmp_path, run.Limits(wall_s=60))
    assert o.rc == 1 and o.exception["type"] == "ZeroDivisionError"
    assert o.exception["location"].startswith("memsim/cli/step.py:") and "Traceback" in o.stderr
    [(cls, _)] = run.judge(["run", "--model", "gpt2"], o, tmp_path, set())
    assert cls.startswith("ZeroDivisionError at memsim/cli/step.py:")


def test_a_hang_is_stopped_by_its_cpu_time_and_named(monkeypatch, tmp_path):
    import memsim.run.api

    def spin(*a, **k):
        while True:
            os.getpid()

    monkeypatch.setattr(memsim.run.api, "run", spin)
    for execute in (run.run_forked, run.run_inprocess):
        o = execute(["run", "--model", "gpt2"], tmp_path, run.Limits(wall_s=120, cpu_s=1))
        assert o.cpu_exceeded, execute
        [(cls, detail)] = run.judge(["run", "--model", "gpt2"], o, tmp_path, set())
        assert cls.startswith(run.CPU) and cls.endswith("(memsim run)")
        if execute is run.run_forked:  # faulthandler's dump at SIGXCPU says where it spun
            assert "stuck at memsim/" in detail, o.stderr[-500:]


def test_replay(monkeypatch, tmp_path, capsys):
    import memsim.run.api

    record = {"kind": "hw", "case": 0, "steps": [["run", "--hw", "{DIR}/hw.yaml", "--model", "gpt2", "--context",
                                                 "16"]], "recipe": ["a folder"],
              "files": {"hw.yaml": {"special": "directory"}}}
    report = tmp_path / "r.jsonl"
    report.write_text(json.dumps(record) + "\n")
    assert campaign.main(["--replay", str(report), "--isolate", "none"]) == 0  # "file not found": one line
    assert "0 of 1 cases still fail" in capsys.readouterr().out
    monkeypatch.setattr(memsim.run.api, "run", lambda *a, **k: 1 / 0)
    monkeypatch.setenv("MEMSIM_DEBUG", "1")  # the traceback escapes, as without the CLI's safety net
    assert campaign.main(["--replay", str(report), "--isolate", "none"]) == 1
    assert "ZeroDivisionError at memsim/cli/step.py" in capsys.readouterr().out


def test_a_signal_at_any_moment_leaves_a_whole_run(tmp_path):
    """The signal action on a real run: the output afterwards is a whole run, and the next run works."""
    limits = run.Limits(wall_s=300, cpu_s=60)
    for which, delay in (("SIGINT", 0.5), ("SIGTERM", 0.5)):
        folder = tmp_path / which
        folder.mkdir()
        steps = [["run", "--model", "gpt2", "--context", "16", "--sensitivity", "0", "--out", "{DIR}/out"]]
        found = hostile.run_signal(Case("signal", {}, steps, [], action=("signal", which, delay)), folder, limits)
        assert found == [] or all(c.startswith(run.TIMEOUT) for c, _ in found), found
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "summary.json").write_text("{")
    assert hostile._whole_run(partial).startswith("lacks ops.csv")
