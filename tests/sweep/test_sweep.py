"""Sweeps: ranges, the cartesian product, failures kept as rows, resume, Dask, plots."""
from __future__ import annotations

import pandas as pd
import pytest

from memsim import ConfigError
from memsim.cli import main as cli
from memsim.core import limits, pools
from memsim.sweep import runner as sweeping

SRAM = "sram.capacity=256KiB..4MiB:x2"


def test_ranges_and_lists_expand_with_units():
    assert sweeping.expand("256KiB..4MiB:x2") == ["256 KiB", "512 KiB", "1 MiB", "2 MiB", "4 MiB"]
    assert sweeping.expand("1..7:+3") == ["1", "4", "7"]
    assert sweeping.expand("bf16,int8,int4") == ["bf16", "int8", "int4"]
    assert sweeping.expand("1TB/s..4TB/s:x2,8TB/s") == ["1 TB/s", "2 TB/s", "4 TB/s", "8TB/s"]
    with pytest.raises(ConfigError):
        sweeping.expand("4MiB..1MiB:x2")
    with pytest.raises(ConfigError):
        sweeping.expand("1..2:y3")


def test_points_are_the_cartesian_product():
    sweeps = sweeping.parse_sweeps(["batch=1,2", "weight-dtype=bf16,int8,int4"])
    pts = list(sweeping.points(sweeps))
    assert len(pts) == 6 and pts[0] == {"batch": "1", "weight_dtype": "bf16"}


def _base(**kw):
    base = dict(hw="h100-sxm", model="llama-2-7b", phase="prefill", prompt=512, context=0, batch=1)
    base.update(kw)
    return base


def test_sram_sweep_with_two_workers_writes_one_row_per_point(tmp_path):
    out = tmp_path / "sweep"
    res = sweeping.run_sweep(_base(), sweeping.parse_sweeps([SRAM]), out, workers=2, progress=False)
    df = pd.read_csv(out / "results.csv")
    assert list(df["sram.capacity"]) == ["256 KiB", "512 KiB", "1 MiB", "2 MiB", "4 MiB"]
    assert list(df.columns[:3]) == ["sram.capacity", "sram.capacity_bytes", "error"] and df["error"].isna().all()
    assert (df["workload.tokens"] == 512).all()
    hbm = df["bytes_per_level.hbm.total"].tolist()
    assert hbm == sorted(hbm, reverse=True) and hbm[0] > hbm[-1]
    assert len(res.rows) == 5


def test_rerun_resumes_and_a_bad_point_becomes_an_error_row(tmp_path):
    out = tmp_path / "sweep"
    sweeps = sweeping.parse_sweeps([SRAM + ",-1MiB"])
    sweeping.run_sweep(_base(), sweeps, out, workers=2, progress=False)
    df = pd.read_csv(out / "results.csv")
    bad = df[df["sram.capacity"] == "-1MiB"]
    assert len(df) == 6 and len(bad) == 1 and "negative" in bad["error"].iloc[0]
    assert df[df["sram.capacity"] != "-1MiB"]["error"].isna().all()
    # A killed sweep: the log lost its last line. The re-run runs only that point.
    log = out / "points.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:10])
    again = sweeping.run_sweep(_base(), sweeps, out, workers=1, progress=False)
    assert again.skipped == 5 and len(again.rows) == 6
    assert pd.read_csv(out / "results.csv").drop(columns="error").equals(df.drop(columns="error"))
    done = sweeping.run_sweep(_base(), sweeps, out, workers=1, progress=False)
    assert done.skipped == 6


def test_run_fields_can_be_swept(tmp_path):
    res = sweeping.run_sweep(_base(phase="decode", context=128), sweeping.parse_sweeps(
        ["batch=1,4", "weight_dtype=bf16,int4"]), tmp_path, workers=1, progress=False)
    df = pd.read_csv(tmp_path / "results.csv")
    assert len(df) == 4 and df["error"].isna().all()
    assert set(zip(df["workload.batch"], df["workload.weight_dtype"])) == {
        (1, "bf16"), (1, "int4"), (4, "bf16"), (4, "int4")}
    assert len(res.rows) == 4


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_rows(tmp_path):
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    sweeps = sweeping.parse_sweeps(["sram.capacity=256KiB..1MiB:x2"])
    sweeping.run_sweep(_base(), sweeps, tmp_path / "pool", workers=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        sweeping.run_sweep(_base(), sweeps, tmp_path / "dask", scheduler=client, progress=False)
    pool = pd.read_csv(tmp_path / "pool" / "results.csv")
    dask = pd.read_csv(tmp_path / "dask" / "results.csv")
    pd.testing.assert_frame_equal(pool, dask)


def _cli(monkeypatch, capsys, *args):
    monkeypatch.setattr("sys.argv", ["memsim", *args])
    code = 0
    try:
        cli.entry()
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr()


def test_cli_sweep_yaml_keep_and_plot(monkeypatch, capsys, tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text("model: gpt2\nphase: decode\ncontext: 64\nset:\n  sram.capacity: [64KiB, 1MiB]\n"
                    "  hbm.bandwidth: 1TB/s..2TB/s:x2\n")
    out = tmp_path / "out"
    code, io = _cli(monkeypatch, capsys, "sweep", "--sweep", str(spec), "--out", str(out), "--workers", "1",
                    "--keep", "--no-progress")
    assert code == 0, io.err
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 4 and list(df.columns[:5]) == ["sram.capacity", "sram.capacity_bytes", "hbm.bandwidth",
                                                     "hbm.bandwidth_bytes_per_s", "error"]
    for kept in df["outputs"]:  # each point's outputs under its key, named in its row
        summary = pd.read_json(out / kept / "summary.json", typ="series")
        row = df[df["outputs"] == kept].iloc[0]
        assert summary["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-12)
    fast = df[df["hbm.bandwidth"] == "2 TB/s"]["step_time_s"].tolist()
    slow = df[df["hbm.bandwidth"] == "1 TB/s"]["step_time_s"].tolist()
    assert all(f < s for f, s in zip(fast, slow))
    pytest.importorskip("matplotlib")
    code, io = _cli(monkeypatch, capsys, "plot", "sweep", str(out / "results.csv"))
    assert code == 0 and (out / "results.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_sweep_bad_input(monkeypatch, capsys, tmp_path):
    code, io = _cli(monkeypatch, capsys, "sweep", "--model", "gpt2", "--set", "sram.capacity=1MiB..2MiB",
                    "--out", str(tmp_path / "o"))
    assert code == 2 and "needs a step" in io.err and len(io.err.strip().splitlines()) == 1
    spec = tmp_path / "s.yaml"
    spec.write_text("modle: gpt2\n")
    code, io = _cli(monkeypatch, capsys, "sweep", "--sweep", str(spec), "--out", str(tmp_path / "o"))
    assert code == 2 and "modle" in io.err


def _gpt2(**kw):
    return {"hw": "h100-sxm", "model": "gpt2", "phase": "decode", "context": 64, **kw}


def test_another_experiment_into_the_same_folder_is_refused_and_nothing_mixes(monkeypatch, capsys, tmp_path):
    out = str(tmp_path / "d")
    args = ["sweep", "--model", "gpt2", "--context", "64", "--set", "sram.capacity=1MiB,2MiB", "--out", out,
            "--workers", "1", "--no-progress"]
    assert _cli(monkeypatch, capsys, *args, "--hw", "h100-sxm")[0] == 0
    code, io = _cli(monkeypatch, capsys, *args, "--hw", "a100-80gb-sxm")
    assert code == 2 and "another experiment" in io.err and "hw" in io.err
    assert len(io.err.strip().splitlines()) == 1
    code, io = _cli(monkeypatch, capsys, "sweep", "--model", "gpt2", "--context", "64", "--set", "batch=1,2",
                    "--out", out, "--workers", "1", "--no-progress")
    assert code == 2 and "swept" in io.err
    df = pd.read_csv(tmp_path / "d" / "results.csv")
    assert len(df) == 2 and set(df["hardware"]) == {"h100-sxm"} and "batch" not in df.columns[:1]


def test_more_values_of_the_same_field_resume_and_changed_files_are_refused(tmp_path):
    chip = tmp_path / "chip.yaml"
    from memsim.core.presets import resolve
    chip.write_text(resolve("h100-sxm", "hardware", (".yaml",)).read_text())
    out = tmp_path / "d"
    sweeping.run_sweep(_gpt2(hw=str(chip)), sweeping.parse_sweeps(["sram.capacity=1MiB,2MiB"]), out, workers=1,
                       progress=False)
    more = sweeping.run_sweep(_gpt2(hw=str(chip)), sweeping.parse_sweeps(["sram.capacity=1MiB,2MiB,4MiB"]), out,
                              workers=1, progress=False)
    assert more.skipped == 2 and len(more.rows) == 3
    chip.write_text(chip.read_text().replace("name: h100-sxm", "name: h100-edited"))
    with pytest.raises(ConfigError, match=r"another experiment.*hw_content"):
        sweeping.run_sweep(_gpt2(hw=str(chip)), sweeping.parse_sweeps(["sram.capacity=1MiB"]), out, workers=1,
                           progress=False)


def test_points_are_keyed_by_the_whole_run():
    from memsim.sweep.store import run_key

    one = sweeping.point_spec(_gpt2(), {"sram.capacity": "1MiB"})
    assert run_key(one) == run_key(sweeping.point_spec(_gpt2(), {"sram.capacity": "1MiB"}))
    for other in (sweeping.point_spec(_gpt2(), {"sram.capacity": "2MiB"}),
                  sweeping.point_spec(_gpt2(hw="a100-80gb-sxm"), {"sram.capacity": "1MiB"}),
                  sweeping.point_spec(_gpt2(context=65), {"sram.capacity": "1MiB"}),
                  sweeping.point_spec(_gpt2(kv_dtype="fp8"), {"sram.capacity": "1MiB"})):
        assert run_key(other) != run_key(one)


def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path):
    import fcntl

    out = tmp_path / "d"
    out.mkdir()
    with (out / ".lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConfigError, match="another sweep is writing"):
            sweeping.run_sweep(_gpt2(), sweeping.parse_sweeps(["batch=1,2"]), out, workers=1, progress=False)
    assert not (out / "results.csv").exists()


@pytest.mark.parametrize(("text", "needle"), [
    ("model: gpt2\nset:\n  batch: [1, 2\n", "invalid YAML"),
    ("model: gpt2\nbatch: lots\nset:\n  sram.capacity: [1MiB]\n", "batch: expected an integer"),
    ("model: gpt2\nphase: train\nset:\n  batch: [1]\n", "phase: 'train' is not one of"),
    ("model: gpt2\nset:\n  batch: {a: 1}\n", "set.batch"),
])
def test_a_bad_sweep_file_is_one_line_and_writes_nothing(monkeypatch, capsys, tmp_path, text, needle):
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    code, io = _cli(monkeypatch, capsys, "sweep", "--sweep", str(spec), "--out", str(tmp_path / "o"),
                    "--workers", "1", "--no-progress")
    assert code == 2 and needle in io.err and str(spec) in io.err, io.err
    assert len(io.err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_a_malformed_base_chip_or_a_bad_swept_run_value_stops_before_any_point(monkeypatch, capsys, tmp_path):
    chip = tmp_path / "chip.yaml"
    chip.write_text("name: broken\ncompute: 3\n")
    code, io = _cli(monkeypatch, capsys, "sweep", "--hw", str(chip), "--model", "gpt2", "--set",
                    "sram.capacity=1MiB,2MiB", "--out", str(tmp_path / "o"), "--no-progress")
    assert code == 2 and str(chip) in io.err and not (tmp_path / "o").exists()
    code, io = _cli(monkeypatch, capsys, "sweep", "--model", "gpt2", "--set", "batch=1,0", "--out",
                    str(tmp_path / "o"), "--no-progress")
    assert code == 2 and "--batch: must be at least 1" in io.err and not (tmp_path / "o").exists()
    code, io = _cli(monkeypatch, capsys, "sweep", "--model", "gpt2", "--set", "batch=1", "--set", "batch=2",
                    "--out", str(tmp_path / "o"), "--no-progress")
    assert code == 2 and "swept twice" in io.err


def test_pool_workers_die_with_a_killed_sweep(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    script = ("from memsim.sweep import runner as s\n"
              f"s.run_sweep({_gpt2(model='llama-2-7b', context=2048)!r}, s.parse_sweeps(['batch=1..64:+1']), "
              f"{str(tmp_path / 'd')!r}, workers=2, progress=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", script])

    def children():
        path = f"/proc/{proc.pid}/task/{proc.pid}/children"
        return [int(p) for p in open(path).read().split()] if os.path.exists(path) else []

    deadline = time.time() + 60
    while len(children()) < 2 and time.time() < deadline:
        time.sleep(0.2)
    workers = children()
    assert len(workers) >= 2, "the pool never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    alive = workers
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [w for w in workers if os.path.exists(f"/proc/{w}") and
                 open(f"/proc/{w}/stat").read().split()[2] != "Z"]
    assert not alive, f"workers outlived their sweep: {alive}"


# --- issue 20: one sweep, one experiment; nothing written among someone else's files ---

def _sweep_cli(monkeypatch, capsys, out, *sets, extra=()):
    args = ["sweep", "--model", "gpt2", "--context", "16", "--out", str(out), "--workers", "1", "--no-progress"]
    for item in sets:
        args += ["--set", item]
    return _cli(monkeypatch, capsys, *args, *extra)


def test_a_folder_of_someone_elses_files_is_refused_even_through_a_link(monkeypatch, capsys, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(theirs)
    for out in (theirs, link):
        code, io = _sweep_cli(monkeypatch, capsys, out, "batch=1,2")
        assert code == 2 and "--out" in io.err and len(io.err.strip().splitlines()) == 1, io.err
    assert sorted(p.name for p in theirs.iterdir()) == ["thesis.tex"]


def test_a_mistyped_swept_path_is_one_line_before_any_point_runs(monkeypatch, capsys, tmp_path):
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "sram=1MiB,2MiB")
    assert code == 2 and "--set: sram: cannot set a field here" in io.err, io.err
    assert len(io.err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
    # a path every value of which fails is refused the same way, with the first value's error
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "sram.capacity=1,2")
    assert code == 2 and "is not a size" in io.err and not (tmp_path / "o").exists()


def test_a_sweep_whose_every_point_fails_exits_2(monkeypatch, capsys, tmp_path):
    # a path no chip takes is refused before any point runs, naming the field
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "sram.capacityy=1MiB,2MiB")
    assert code == 2 and "capacityy" in io.err and "unknown field" in io.err, io.err
    assert len(io.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()  # a new folder of nothing but failures is not left behind
    (tmp_path / "empty").mkdir()
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "empty", "sram.capacityy=1MiB,2MiB")
    assert code == 2 and list((tmp_path / "empty").iterdir()) == []  # the user's empty folder stays, empty
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "p", "sram.capacity=1MiB,-1MiB")
    assert code == 0, io.err  # one good point: the sweep stands


def test_a_repeated_value_is_one_point_before_and_after_a_resume(monkeypatch, capsys, tmp_path):
    out = tmp_path / "o"
    code, io = _sweep_cli(monkeypatch, capsys, out, "batch=1,2,3,1")
    assert code == 0 and "listed more than once" in io.err
    assert list(pd.read_csv(out / "results.csv")["batch"]) == [1, 2, 3]
    log = out / "points.jsonl"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:1]))  # killed after one point
    code, io = _sweep_cli(monkeypatch, capsys, out, "batch=1,2,3,1")
    assert code == 0 and list(pd.read_csv(out / "results.csv")["batch"]) == [1, 2, 3]


def test_kept_outputs_are_keyed_by_the_point_not_its_place(monkeypatch, capsys, tmp_path):
    out = tmp_path / "o"
    assert _sweep_cli(monkeypatch, capsys, out, "batch=1,4", extra=["--keep"])[0] == 0
    first = pd.read_csv(out / "results.csv").set_index("batch")["outputs"].to_dict()
    kept4 = (out / first[4] / "summary.json").read_text()
    assert _sweep_cli(monkeypatch, capsys, out, "batch=1,2,4", extra=["--keep"])[0] == 0
    df = pd.read_csv(out / "results.csv").set_index("batch")
    assert df["outputs"][4] == first[4] and (out / first[4] / "summary.json").read_text() == kept4
    for batch, kept in df["outputs"].items():
        import json
        assert json.loads((out / kept / "summary.json").read_text())["workload"]["batch"] == batch


def test_a_file_edited_during_a_sweep_stops_it_and_a_resume_is_refused(monkeypatch, tmp_path):
    from memsim.core.presets import resolve
    from memsim.run import api

    chip = tmp_path / "chip.yaml"
    chip.write_text(resolve("h100-sxm", "hardware", (".yaml",)).read_text())
    real, calls = api.run, []

    def editing(spec):
        calls.append(spec)
        if len(calls) == 2:  # someone edits the chip while the second point runs
            chip.write_text(chip.read_text().replace("name: h100-sxm", "name: h100-edited"))
        return real(spec)

    monkeypatch.setattr(sweeping, "run", editing)  # the run each point makes (sweep imports api's)
    out = tmp_path / "o"
    with pytest.raises(ConfigError, match="changed while the sweep ran"):
        sweeping.run_sweep(_gpt2(hw=str(chip)), sweeping.parse_sweeps(["batch=1,2,3,4"]), out, workers=1,
                           progress=False)
    df = pd.read_csv(out / "results.csv")
    assert list(df["batch"]) == [1] and set(df["hardware"]) == {"h100-sxm"}  # the edited point is not kept
    with pytest.raises(ConfigError, match=r"another experiment.*hw_content"):
        sweeping.run_sweep(_gpt2(hw=str(chip)), sweeping.parse_sweeps(["batch=1,2,3,4"]), out, workers=1,
                           progress=False)


def test_a_swept_file_edited_between_a_kill_and_the_resume_is_refused(tmp_path):
    from memsim.core.presets import resolve

    files = []
    for name in ("hwa.yaml", "hwb.yaml"):
        files.append(tmp_path / name)
        files[-1].write_text(resolve("h100-sxm", "hardware", (".yaml",)).read_text())
    out = tmp_path / "o"
    sweeps = sweeping.parse_sweeps([f"hw={files[0]},{files[1]}", "batch=1,2"])
    sweeping.run_sweep(_gpt2(), sweeps, out, workers=1, progress=False)
    files[0].write_text(files[0].read_text().replace("name: h100-sxm", "name: h100-edited"))
    with pytest.raises(ConfigError, match=r"hwa.yaml: the file changed since this sweep began"):
        sweeping.run_sweep(_gpt2(), sweeps, out, workers=1, progress=False)
    assert len(pd.read_csv(out / "results.csv")) == 4


def _killed(*args, **kwargs):
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)  # the out-of-memory killer takes the worker


def test_a_lost_worker_is_one_line_and_the_finished_points_are_kept(monkeypatch, capsys, tmp_path):
    out = tmp_path / "o"
    assert _sweep_cli(monkeypatch, capsys, out, "batch=1,2")[0] == 0
    monkeypatch.setattr(sweeping, "run_point", _killed)
    code, io = _cli(monkeypatch, capsys, "sweep", "--model", "gpt2", "--context", "16", "--out", str(out),
                    "--workers", "2", "--no-progress", "--set", "batch=1,2,3,4")
    assert code == 2 and "a worker process died" in io.err and len(io.err.strip().splitlines()) == 1, io.err
    assert list(pd.read_csv(out / "results.csv")["batch"]) == [1, 2]


def test_results_csv_is_appended_not_rewritten_for_each_point(monkeypatch, tmp_path):
    from memsim.sweep import store as sweep_store

    whole = []
    real = sweep_store.Results.write_csv
    monkeypatch.setattr(sweep_store.Results, "write_csv", lambda self: whole.append(1) or real(self))
    out = tmp_path / "o"
    sweeping.run_sweep(_gpt2(), sweeping.parse_sweeps(["batch=1..8:+1"]), out, workers=1, progress=False)
    assert len(whole) == 2  # once when the first row sets the columns, once at the end in the sweep's order
    appended = (out / "results.csv").read_text()
    df = pd.read_csv(out / "results.csv")
    assert list(df["batch"]) == list(range(1, 9)) and df["error"].isna().all()
    real(sweep_store.Results(out, ["batch"], {}))  # written whole from the log: the same table
    assert pd.read_csv(out / "results.csv").equals(pd.read_csv(__import__("io").StringIO(appended)))


def test_the_product_is_walked_lazily_and_workers_are_capped(monkeypatch, tmp_path):
    import tracemalloc
    import warnings

    huge = sweeping.parse_sweeps(["batch=1..50000:+1", "context=1..50000:+1"])
    assert sweeping.size(huge) == 2_500_000_000
    with pytest.raises(ConfigError, match="2,500,000,000 points exceed memsim's limit"):  # refused up front
        sweeping.run_sweep({"model": "gpt2"}, huge, tmp_path / "huge", workers=1, progress=False)
    assert not (tmp_path / "huge").exists()
    sweeps = sweeping.parse_sweeps(["batch=1..1000:+1", "context=1..1000:+1"])
    assert sweeping.size(sweeps) == limits.MAX_POINTS
    ran = []

    def two(results, row, bar):
        ran.append(row)
        if len(ran) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(sweeping, "_record", two)
    tracemalloc.start()
    with pytest.raises(KeyboardInterrupt):
        sweeping.run_sweep({"model": "gpt2"}, sweeps, tmp_path / "o", workers=1, progress=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [r["batch"] for r in ran] == ["1", "1"] and peak < 200 * 2**20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sweeping.pool_size(200, 4) == min(4, sweeping.worker_cap())
    assert any("workers 200 is more than this machine holds" in str(w.message) for w in caught)  # a Python caller: the keyword
    assert sweeping.pool_size(None, 3) == min(3, sweeping.worker_cap())


@pytest.mark.parametrize("address, needle", [("garbage", "expected a scheduler address"),
                                             ("tcp://127.0.0.1:99999", "not a port"),
                                             pytest.param("tcp://127.0.0.1:1", "cannot reach the scheduler",
                                                          marks=pytest.mark.slow)])
def test_a_dask_scheduler_not_reached_is_one_line_before_anything_is_written(monkeypatch, capsys, tmp_path,
                                                                             address, needle):
    pytest.importorskip("distributed")
    monkeypatch.setattr(pools, "CONNECT_S", 2)
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "batch=1,2", extra=["--scheduler", address])
    assert code == 2 and needle in io.err and len(io.err.strip().splitlines()) == 1, io.err
    assert not (tmp_path / "o").exists()


def test_swept_quantities_get_a_numeric_column_and_the_console_a_results_table(monkeypatch, capsys, tmp_path):
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "sram.capacity=128KiB,1MiB,16MiB", "hbm.latency=1us")
    assert code == 0, io.err
    df = pd.read_csv(tmp_path / "o" / "results.csv")
    assert list(df.columns[:5]) == ["sram.capacity", "sram.capacity_bytes", "hbm.latency", "hbm.latency_s", "error"]
    assert df["sram.capacity_bytes"].tolist() == [128 << 10, 1 << 20, 16 << 20]
    assert df["hbm.latency_s"].tolist() == pytest.approx([1e-6] * 3)
    # sorted by the number, not the label ("1 MiB" < "128 KiB" as text)
    assert df.sort_values("sram.capacity_bytes")["sram.capacity"].tolist() == ["128KiB", "1MiB", "16MiB"]
    table = io.out.splitlines()
    head = next(i for i, line in enumerate(table) if line.startswith("sram.capacity"))
    assert table[head].split()[:4] == ["sram.capacity", "hbm.latency", "step", "ms"]
    for line, ms in zip(table[head + 1:head + 4], df["step_time_s"] * 1e3):
        assert float(line.split()[2]) == pytest.approx(ms, rel=1e-3)


def test_a_run_option_given_and_swept_is_refused(monkeypatch, capsys, tmp_path):
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "context=8,16")  # --context 16 is given as well
    assert code == 2 and io.err.strip() == "memsim: error: --context: given and also swept (--set context=...): give one"
    assert not (tmp_path / "o").exists()
    code, io = _sweep_cli(monkeypatch, capsys, tmp_path / "o", "batch=1,2")  # --batch left at its default
    assert code == 0, io.err
