"""The fuzz harness's own parts that run no case: its oracle, its tally of timeouts, the hostile
values and the vocabularies it reads from memsim (fast: in the default run)."""
from __future__ import annotations

from . import hostile, run, vocab
from .campaign import Fuzzer
from .inputs import Case
from .mutate import leaves


def _outcome(rc, stderr="", **kw):
    return run.Outcome(rc=rc, stderr=stderr, **kw)


def test_the_oracle(tmp_path):
    args = ["run", "--hw", "x.yaml", "--out", str(tmp_path / "out")]
    before = run.snapshot(tmp_path)
    assert run.judge(args, _outcome(0), tmp_path, before) == [
        ("exit 0 but --out lacks files (memsim run)", "summary.json, ops.csv, timeline.csv, hardware.yaml")]
    assert run.judge(args, _outcome(2, "memsim: error: x.yaml: name: missing\n"), tmp_path, before) == []
    [(two, _)] = run.judge(args, _outcome(2, "memsim: error: x.yaml: bad\n  at line 3\n"), tmp_path, before)
    assert two.startswith("exit 2 with 2 stderr lines (memsim run)")
    warned = "/a/memsim/x.py:3: RuntimeWarning: overflow\n  y = x * 2\nmemsim: error: x\n"
    assert run.judge(args, _outcome(2, warned), tmp_path, before)[0][0] == "RuntimeWarning at x.py:3"
    (tmp_path / "out").mkdir()
    (tmp_path / ".out.abc").mkdir()
    classes = [c for c, _ in run.judge(args, _outcome(2, "memsim: error: x\n"), tmp_path, before)]
    assert classes == ["temporary left beside --out (memsim run)", "--out written despite exit 2 (memsim run): x"]
    assert run.judge(args, _outcome(None), tmp_path, before)[0][0] == "timeout (memsim run)"
    assert run.judge(args, _outcome(-9, cpu_exceeded=True), tmp_path, before)[0][0] == "cpu limit (memsim run)"


def test_a_wall_clock_timeout_is_counted_apart_only_when_asked(monkeypatch, tmp_path):
    """On a loaded machine a slow command is no verdict; its CPU time is (``--case-cpu``)."""
    case = Case("hw", {}, [["run", "--model", "gpt2"]], ["test"])
    monkeypatch.setattr(Fuzzer, "run_args", lambda self, args, folder, m=0: run.Outcome(rc=None))
    strict = Fuzzer(tmp_path, run.Limits(wall_s=1), "none", None)
    assert strict.record(case, 0) == ["timeout (memsim run)"] and strict.failed["hw"] == 1
    lenient = Fuzzer(tmp_path, run.Limits(wall_s=1), "none", None, count_timeouts=True)
    assert lenient.record(case, 0) == [] and lenient.failed["hw"] == 0 and lenient.timed_out["hw"] == 1
    assert lenient.timeouts == ["hw#0: timeout (memsim run)"] and lenient.summary(1.0) == 0
    monkeypatch.setattr(Fuzzer, "run_args", lambda self, args, folder, m=0: run.Outcome(rc=-9, cpu_exceeded=True))
    assert lenient.record(case, 1) == ["cpu limit (memsim run)"] and lenient.summary(1.0) == 1


def test_a_kept_entry_that_a_command_changes_is_a_failure(monkeypatch, tmp_path):
    """``Case.keep``: a FIFO, a link and the file behind it must be as they were after the commands."""
    case = Case("output", {"kept.txt": b"mine\n", "pipe": hostile.FIFO, "link": (hostile.LINK, "kept.txt")},
                [["trace", "-o", "{DIR}/link"]], ["test"], keep=["pipe", "link", "kept.txt"])

    def clobber(self, args, folder, max_points=0):
        (folder / "kept.txt").write_text("replaced\n")
        (folder / "pipe").unlink()
        (folder / "pipe").write_text("a file now\n")
        return run.Outcome(rc=0)

    monkeypatch.setattr(Fuzzer, "run_args", clobber)
    failures = Fuzzer(tmp_path, run.Limits(wall_s=10), "none", None).run_case(case)
    assert sorted(c for c, *_ in failures) == ["output: kept.txt was changed", "output: link was changed",
                                               "output: pipe was changed"]
    monkeypatch.setattr(Fuzzer, "run_args", lambda self, args, folder, m=0: run.Outcome(rc=2, stderr=(
        "memsim: error: x\n")))
    assert Fuzzer(tmp_path, run.Limits(wall_s=10), "none", None).run_case(case) == []


def test_hostile_values_stay_bounded_and_typed():
    tree = {"levels": [{"name": "hbm", "bandwidth": "3 TB/s", "latency": {"estimate": "600 ns"}}],
            "power": {"tdp": "700 W"}, "compute": {"units": 132, "peak": {"bf16": "989 TFLOP/s"}}, "bogus": 1}
    kinds = {p: hostile.extreme_kind(vocab.hardware_unit(p)) for p in leaves(tree)}
    assert kinds == {("levels", 0, "name"): "", ("levels", 0, "bandwidth"): "bandwidth",
                     ("levels", 0, "latency", "estimate"): "time", ("power", "tdp"): "power",
                     ("compute", "units"): "number", ("compute", "peak", "bf16"): "flops", ("bogus",): ""}
    text = hostile._yaml_with(tree, ("compute", "units"), hostile.BOMB).decode()
    assert "units: [&a [lol" in text and len(text) < 2000  # a few hundred bytes that expand to 9^9 items


def test_the_vocabularies_are_memsim_s_own():
    """Read from the registries and declarations, so a family, topology or field added to memsim
    is fuzzed without a word here."""
    from memsim.hardware.families import FAMILIES
    from memsim.mapping.strategy import STRATEGIES

    assert vocab.families() == FAMILIES.names()
    assert {FAMILIES[f].strategy for f in vocab.families()} <= set(STRATEGIES)  # a strategy for every family
    fields = {f.path: f for f in vocab.hardware_fields()}
    assert fields["family"].choices == FAMILIES.names() and fields["levels.capacity"].unit == "bytes"
    assert fields["system.topology"].choices == vocab.topologies()
    assert fields["system.collective"].choices == vocab.collectives()
    assert vocab.default_preset() in vocab.presets() and "onnx" in vocab.importers()
    assert {"--hw", "--out", "--set"} <= set(vocab.commands()["run"][0])
    assert "--ranks" in vocab.commands()["import chakra"][0] and "--ep" in vocab.commands()["run"][1]
    assert all(vocab.op_kinds()) and vocab.run_outputs()[0] == "summary.json"
