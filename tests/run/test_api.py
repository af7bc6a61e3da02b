"""The Python API: what a caller passes that is not what it takes is a memsim error, one line."""
from __future__ import annotations

import pytest

import memsim
from memsim.run import api


@pytest.mark.parametrize("call,field,needle", [
    (lambda: memsim.simulate("h100-sxm", "gpt2", context=8, set=5), "set", "got 5"),
    (lambda: memsim.simulate("h100-sxm", "gpt2", context=8, set=[5]), "set", "got 5"),
    (lambda: api.simulate_graph("h100-sxm", None), "graph", "got None"),
    (lambda: api.simulate_graph("h100-sxm", "gpt2"), "graph", "got 'gpt2'"),
    (lambda: api.run("gpt2"), "spec", "got 'gpt2'"),
])
def test_a_wrong_argument_is_a_memsim_error_naming_it(call, field, needle):
    """Issue 20: these raised TypeError or AttributeError from inside memsim."""
    with pytest.raises(memsim.ConfigError) as info:
        call()
    assert info.value.field == field and needle in str(info.value) and "\n" not in str(info.value)


def test_no_overrides_is_none_as_well_as_empty():
    none = memsim.simulate("h100-sxm", "gpt2", context=8, set=None).summary.step_time_s
    assert none == memsim.simulate("h100-sxm", "gpt2", context=8, set={}).summary.step_time_s


def test_a_python_caller_is_told_keyword_arguments_and_the_command_line_its_flags(monkeypatch, capsys):
    import memsim
    from tests.cli.test_cli import run_cli

    with pytest.raises(memsim.ConfigError) as info:
        memsim.simulate(model="gpt2", batch=0)
    assert info.value.field == "batch" and "--" not in str(info.value)
    with pytest.raises(memsim.ConfigError) as info:
        memsim.simulate(model="gpt2", trace="t.json")
    assert str(info.value) == "model/trace: give exactly one of model and trace"
    code, _, err = run_cli(monkeypatch, capsys, "run", "--model", "gpt2", "--batch", "0")
    assert code == 2 and err == "memsim: error: --batch: must be at least 1, got 0\n"


def test_a_warning_about_a_file_whose_name_holds_a_newline_is_one_line(monkeypatch, capsys, tmp_path,
                                                                      tiny_model_path):
    import json

    from tests.cli.test_cli import run_cli

    model = tmp_path / "two\nlines.json"
    config = json.loads(tiny_model_path.read_text())
    config["name"] = "two\nlines"
    model.write_text(json.dumps(config))
    _code, _, err = run_cli(monkeypatch, capsys, "run", "--model", str(model), "--context", "100000")
    warned = [line for line in err.splitlines() if "warning" in line]
    assert len(err.strip().splitlines()) == len([ln for ln in err.splitlines() if ln.startswith("memsim: ")])
    assert warned and "two lines" in warned[0], err


def test_a_result_in_a_notebook_is_one_line_with_its_tables_a_call_away():
    import memsim

    r = memsim.simulate("h100-sxm", "gpt2", context=64)
    text = repr(r)
    assert text.startswith("Result(h100-sxm, gpt2 decode, batch 1, step ") and text.endswith(" ms)")
    assert len(text) < 100 and f"{r.summary.step_time_s * 1e3:.4g} ms" in text
    assert r.stalls.index[0] == max(r.summary.stall_s, key=r.summary.stall_s.get)
    assert r.stalls.sum() == pytest.approx(r.summary.stall_total_s)
    row = r.summary_frame()
    assert len(row) == 1 and row["step_time_s"][0] == r.summary.step_time_s
    assert row["bytes_per_level.hbm.total"][0] == r.summary.bytes_per_level["hbm"].total


def test_simulate_takes_a_chipspec_a_dict_and_numbers_for_quantities():
    import memsim
    from memsim.hardware import load_chip, resolve

    chip, _ = load_chip(resolve("h100-sxm", "hardware", (".yaml",)))
    base = memsim.simulate("h100-sxm", "gpt2", context=64, set={"hbm.bandwidth": "1TB/s"}).summary.step_time_s
    as_text = memsim.simulate(chip, "gpt2", context=64, set={"hbm.bandwidth": "1TB/s"}).summary.step_time_s
    as_dict = memsim.simulate({"base": "h100-sxm", "hbm.bandwidth": "1TB/s"}, "gpt2", context=64)
    as_number = memsim.simulate("h100-sxm", "gpt2", context=64, set={"hbm.bandwidth": 1e12, "hbm.latency": 600e-9})
    assert base == as_text == as_dict.summary.step_time_s == as_number.summary.step_time_s
    assert memsim.simulate("h100-sxm", "gpt2", context=64, set={"sram.capacity": 64 * 2**20}).summary.step_time_s == \
        memsim.simulate("h100-sxm", "gpt2", context=64, set={"sram.capacity": "64MiB"}).summary.step_time_s
    with pytest.raises(memsim.ConfigError) as info:
        memsim.simulate(42, "gpt2")
    assert info.value.field == "hw" and "--" not in str(info.value)


def test_sweep_frame_returns_the_results_table(tmp_path):
    import memsim

    df = memsim.sweep_frame("h100-sxm", "gpt2", {"sram.capacity": [2**20, "16MiB"], "batch": [1, 4]}, context=32,
                            workers=1, out=tmp_path / "s")
    assert len(df) == 4 and (tmp_path / "s" / "results.csv").is_file()
    assert sorted(df["sram.capacity_bytes"].unique()) == [2**20, 16 * 2**20]
    assert df.groupby("batch")["step_time_s"].mean().is_monotonic_increasing
    with pytest.raises(memsim.ConfigError, match="expected a dict"):
        memsim.sweep_frame("h100-sxm", "gpt2", ["sram.capacity"])


def test_a_runs_tables_are_built_when_first_read_and_then_kept():
    r = memsim.simulate("h100-sxm", "gpt2", context=64, sensitivity=0)
    assert r.tables._made == {}  # nobody read them yet: a rerun that only wants the summary builds none
    ops = r.ops
    assert set(r.tables._made) == {"ops"} and r.ops is ops and len(ops) > 0
    assert abs(r.timeline.end_s.max() - r.summary.step_time_s) < 1e-9 * r.summary.step_time_s + 1e-15


def test_a_run_and_its_reruns_build_each_graph_once_and_map_once_what_only_the_stack_step_changes(monkeypatch):
    """The estimates' reruns change the chip or the stack, never the workload: the step's graph is built
    once; a rerun that changes only the stack's work per step reuses the run's mapping; one that changes
    the chip maps anew. Each result is still the one a run of its own gives."""
    from memsim import workload
    from memsim.mapping import strategy
    from memsim.run import steps

    built, mapped, reruns = [], [], []
    real_build, real_plan, real_rerun = workload.build_step, strategy.STRATEGIES.get("gpu"), api._time_and_energy
    monkeypatch.setattr(steps.workload, "build_step", lambda *a: built.append(a[1]) or real_build(*a))
    monkeypatch.setitem(strategy.STRATEGIES._entries, "gpu", lambda *a: mapped.append(1) or real_plan(*a))
    monkeypatch.setattr(api, "_time_and_energy", lambda spec: reruns.append(spec.set[-1][0]) or real_rerun(spec))
    result = api.run(api.resolve("h100-sxm", "gpt2", context=64, sensitivity=6))
    rows = {row.field: row for row in result.summary.estimates.sensitive}
    assert len(built) == 1 and "stack.step.fixed" in rows and "levels.hbm.latency" in reruns
    on_chip = [path for path in reruns if not path.startswith("stack.")]
    assert len(reruns) > len(on_chip) and len(mapped) == 1 + len(on_chip)
    alone = memsim.simulate("h100-sxm", "gpt2", context=64, set={"stack.step.fixed": rows["stack.step.fixed"].range[1]})
    assert alone.summary.step_time_s == rows["stack.step.fixed"].step_time_s[1]


@pytest.mark.parametrize("kw", [dict(hw="h100-sxm", model="gpt2", context=64, tp=2),
                                dict(hw="wse-3", model="gpt2", phase="prefill", prompt=32, microbatches=2),
                                dict(hw="h100-sxm", model="gpt2", context=64, set={"execution.power_cap": "150 W"})],
                         ids=["tp2", "wafer", "capped"])
def test_an_estimates_rerun_gives_the_time_and_energy_its_full_run_does(kw):
    spec = api.resolve(**kw)
    summary = api.run(spec).summary
    assert api._time_and_energy(spec) == (summary.step_time_s, summary.energy_j.total)
