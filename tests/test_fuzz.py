"""scripts/fuzz.py: its oracle, its reproducibility, and a fixed-seed slice of the campaign (issue 11)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLICE = ["--cases", "150", "--seed", "0", "--case-timeout", "20"]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fuzz = _load("fuzz")
fuzz_run = sys.modules["fuzz_run"]


def test_fixed_seed_slice(tmp_path, capsys):
    report = tmp_path / "report.jsonl"
    code = fuzz.main([*SLICE, "--report", str(report)])
    out = capsys.readouterr().out
    assert "total      150 cases" in out
    failures = [json.loads(line) for line in report.read_text().splitlines()]
    assert code == 0, "\n".join(f"{r['kind']}#{r['case']}: {r['class']}: {r['detail'][:200]}" for r in failures)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzz")
    return fuzz.build_seeds(work / "seeds", lambda a: fuzz_run.run_inprocess(a, work, 600).rc)


def _digests(seeds, seed: int, monkeypatch, tmp_path) -> list[str]:
    """The cases a campaign draws, without running them."""
    drawn = []

    def fake(self, case):
        files = sorted((k, v if isinstance(v, (str, tuple)) else v.hex()) for k, v in case.files.items())
        drawn.append(hashlib.sha256(json.dumps([case.kind, case.steps, case.recipe, files]).encode()).hexdigest())
        return []

    monkeypatch.setattr(fuzz.Fuzzer, "run_case", fake)
    fuzz.Fuzzer(tmp_path, 10, 0, "none", None).campaign(seeds, list(fuzz.KINDS), 48, seed, 0)
    return drawn


def test_a_seed_draws_the_same_cases(seeds, monkeypatch, tmp_path):
    first, again = _digests(seeds, 7, monkeypatch, tmp_path), _digests(seeds, 7, monkeypatch, tmp_path)
    assert len(first) == 48 and first == again
    assert _digests(seeds, 8, monkeypatch, tmp_path) != first


def _outcome(rc, stderr="", **kw):
    return fuzz_run.Outcome(rc=rc, stderr=stderr, **kw)


def test_the_oracle(tmp_path):
    args = ["run", "--hw", "x.yaml", "--out", str(tmp_path / "out")]
    before = fuzz_run.snapshot(tmp_path)
    assert fuzz_run.judge(args, _outcome(0), tmp_path, before) == [
        ("exit 0 but --out lacks files (memsim run)", "summary.json, ops.csv, timeline.csv, hardware.yaml")]
    assert fuzz_run.judge(args, _outcome(2, "memsim: error: x.yaml: name: missing\n"), tmp_path, before) == []
    [(two, _)] = fuzz_run.judge(args, _outcome(2, "memsim: error: x.yaml: bad\n  at line 3\n"), tmp_path, before)
    assert two.startswith("exit 2 with 2 stderr lines (memsim run)")
    warned = "/a/memsim/x.py:3: RuntimeWarning: overflow\n  y = x * 2\nmemsim: error: x\n"
    assert fuzz_run.judge(args, _outcome(2, warned), tmp_path, before)[0][0] == "RuntimeWarning at x.py:3"
    (tmp_path / "out").mkdir()
    (tmp_path / ".out.abc").mkdir()
    classes = [c for c, _ in fuzz_run.judge(args, _outcome(2, "memsim: error: x\n"), tmp_path, before)]
    assert classes == ["temporary left beside --out (memsim run)", "--out written despite exit 2 (memsim run): x"]
    assert fuzz_run.judge(args, _outcome(None), tmp_path, before)[0][0] == "timeout (memsim run)"


def test_a_crash_is_caught_in_the_forked_child(monkeypatch, tmp_path):
    import memsim.api

    def boom(*a, **k):
        return 1 / 0

    monkeypatch.setattr(memsim.api, "run", boom)
    # Without MEMSIM_DEBUG the CLI's safety net turns a bug into one line, which the judge still fails.
    o = fuzz_run.run_forked(["run", "--model", "gpt2"], tmp_path, 60, 0)
    assert o.rc == 2 and "internal error, please report it: ZeroDivisionError" in o.stderr
    [(cls, _)] = fuzz_run.judge(["run", "--model", "gpt2"], o, tmp_path, set())
    assert cls.startswith("internal error (memsim run)")
    monkeypatch.setenv("MEMSIM_DEBUG", "1")
    o = fuzz_run.run_forked(["run", "--model", "gpt2"], tmp_path, 60, 0)
    assert o.rc == 1 and o.exception["type"] == "ZeroDivisionError"
    assert o.exception["location"].startswith("memsim/cli.py:") and "Traceback" in o.stderr
    [(cls, _)] = fuzz_run.judge(["run", "--model", "gpt2"], o, tmp_path, set())
    assert cls.startswith("ZeroDivisionError at memsim/cli.py:")


def test_replay(monkeypatch, tmp_path, capsys):
    import memsim.api

    record = {"kind": "hw", "case": 0, "steps": [["run", "--hw", "{DIR}/hw.yaml", "--model", "gpt2", "--context",
                                                 "16"]], "recipe": ["a folder"],
              "files": {"hw.yaml": {"special": "directory"}}}
    report = tmp_path / "r.jsonl"
    report.write_text(json.dumps(record) + "\n")
    assert fuzz.main(["--replay", str(report), "--isolate", "none"]) == 0  # "file not found": one line
    assert "0 of 1 cases still fail" in capsys.readouterr().out
    monkeypatch.setattr(memsim.api, "run", lambda *a, **k: 1 / 0)
    monkeypatch.setenv("MEMSIM_DEBUG", "1")  # the traceback escapes, as without the CLI's safety net
    assert fuzz.main(["--replay", str(report), "--isolate", "none"]) == 1
    assert "ZeroDivisionError at memsim/cli.py" in capsys.readouterr().out


fuzz_hostile = sys.modules["fuzz_hostile"]


def test_a_kept_entry_that_a_command_changes_is_a_failure(monkeypatch, tmp_path):
    """``Case.keep``: a FIFO, a link and the file behind it must be as they were after the commands."""
    case = fuzz.Case("output", {"kept.txt": b"mine\n", "pipe": fuzz_hostile.FIFO,
                                "link": (fuzz_hostile.LINK, "kept.txt")},
                     [["trace", "-o", "{DIR}/link"]], ["test"], keep=["pipe", "link", "kept.txt"])

    def clobber(self, args, folder, max_points=0):
        (folder / "kept.txt").write_text("replaced\n")
        (folder / "pipe").unlink()
        (folder / "pipe").write_text("a file now\n")
        return fuzz_run.Outcome(rc=0)

    monkeypatch.setattr(fuzz.Fuzzer, "run_args", clobber)
    failures = fuzz.Fuzzer(tmp_path, 10, 0, "none", None).run_case(case)
    assert sorted(c for c, *_ in failures) == ["output: kept.txt was changed", "output: link was changed",
                                               "output: pipe was changed"]
    monkeypatch.setattr(fuzz.Fuzzer, "run_args", lambda self, args, folder, m=0: fuzz_run.Outcome(rc=2, stderr=(
        "memsim: error: x\n")))
    assert fuzz.Fuzzer(tmp_path, 10, 0, "none", None).run_case(case) == []


def test_hostile_values_stay_bounded_and_typed():
    tree = {"levels": [{"name": "hbm", "bandwidth": "3 TB/s", "latency": "600 ns"}], "power": {"tdp": "700 W"},
            "compute": {"units": 132}}
    kinds = {p: fuzz_hostile.unit_kind(fuzz_hostile._at(tree, p)) for p in fuzz_hostile.leaves(tree)}
    assert kinds == {("levels", 0, "name"): "", ("levels", 0, "bandwidth"): "bandwidth",
                     ("levels", 0, "latency"): "time", ("power", "tdp"): "power", ("compute", "units"): "number"}
    text = fuzz_hostile._yaml_with(tree, ("compute", "units"), fuzz_hostile.BOMB).decode()
    assert "units: [&a [lol" in text and len(text) < 2000  # a few hundred bytes that expand to 9^9 items


def test_a_signal_at_any_moment_leaves_a_whole_run(tmp_path):
    """The signal action on a real run: the output afterwards is a whole run, and the next run works."""
    for which, delay in (("SIGINT", 0.6), ("SIGTERM", 0.6)):
        folder = tmp_path / which
        folder.mkdir()
        steps = [["run", "--model", "gpt2", "--context", "16", "--sensitivity", "0", "--out", "{DIR}/out"]]
        assert fuzz_hostile.run_signal(fuzz.Case("signal", {}, steps, [], action=("signal", which, delay)), folder,
                                       120) == []
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "summary.json").write_text("{")
    assert fuzz_hostile._whole_run(partial).startswith("lacks ops.csv")
