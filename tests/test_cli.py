"""The command line: the documented contract, outputs, and one-line errors with exit code 2."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memsim import cli


def run_cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["memsim", *args])
    code = 0
    try:
        cli.entry()
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_writes_outputs(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path):
    out = tmp_path / "out"
    code, stdout, err = run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--model",
                                str(tiny_model_path), "--phase", "prefill", "--batch", "1", "--prompt", "16",
                                "--weight-dtype", "int8", "--kv-dtype", "fp8", "--set", "sram.capacity=32KiB",
                                "--out", str(out))
    assert code == 0, err
    assert "step time" in stdout and "roofline" in stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["workload"]["phase"] == "prefill" and s["workload"]["tokens"] == 16
    assert s["workload"]["weight_dtype"] == "int8" and s["workload"]["kv_dtype"] == "fp8"


def test_trace_round_trip_through_the_cli(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path):
    trace = tmp_path / "t.json"
    assert run_cli(monkeypatch, capsys, "trace", "--model", str(tiny_model_path), "--context", "64",
                   "-o", str(trace))[0] == 0
    code, a, _ = run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--trace", str(trace))
    code2, b, _ = run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--model", str(tiny_model_path),
                          "--context", "64")
    assert code == code2 == 0
    assert a == b


def test_list(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "list", "hw")
    assert code == 0 and {"h100-sxm", "a100-80gb-sxm"} <= set(out.split())
    code, out, _ = run_cli(monkeypatch, capsys, "list", "models")
    assert {"gpt2", "bert-base", "llama-2-7b", "llama-3.1-8b"} <= set(out.split())


def _bad_yaml(tmp_path, tiny_chip_path, old, new):
    path = tmp_path / "bad.yaml"
    text = tiny_chip_path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize("case, expect", [
    ("negative bandwidth", "levels[hbm].bandwidth"),
    ("unitless bandwidth", "levels[hbm].bandwidth"),
    ("unknown field", "levels[hbm].bandwith"),
    ("missing file", "nowhere.yaml"),
    ("cyclic trace", "cycle"),
    ("dangling trace", "ghost"),
    ("does not fit", "fit in no memory level"),
    ("bad override", "levels[sram].capacity"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(monkeypatch, capsys, tmp_path, tiny_chip_path,
                                                         tiny_model_path, case, expect):
    hw, extra = str(tiny_chip_path), []
    model = ["--model", str(tiny_model_path)]
    if case == "negative bandwidth":
        hw = _bad_yaml(tmp_path, tiny_chip_path, "bandwidth: 100 GB/s", "bandwidth: -100 GB/s")
    elif case == "unitless bandwidth":
        hw = _bad_yaml(tmp_path, tiny_chip_path, "bandwidth: 100 GB/s", "bandwidth: 100")
    elif case == "unknown field":
        hw = _bad_yaml(tmp_path, tiny_chip_path, "bandwidth: 100 GB/s", "bandwith: 100 GB/s")
    elif case == "missing file":
        hw = str(tmp_path / "nowhere.yaml")
    elif case in ("cyclic trace", "dangling trace"):
        trace = tmp_path / "t.json"
        run_cli(monkeypatch, capsys, "trace", "--model", str(tiny_model_path), "--context", "8", "-o", str(trace))
        data = json.loads(trace.read_text())
        if case == "cyclic trace":
            data["ops"][0]["deps"] = [data["ops"][-1]["name"]]
        else:
            data["ops"][2]["inputs"].append({"tensor": "ghost", "bytes": 4})
        trace.write_text(json.dumps(data))
        model = ["--trace", str(trace)]
    elif case == "does not fit":
        extra = ["--set", "hbm.capacity=100KB"]
    elif case == "bad override":
        extra = ["--set", "sram.capacity=-1MiB"]
    out = tmp_path / "out"
    code, stdout, err = run_cli(monkeypatch, capsys, "run", "--hw", hw, *model, "--context", "8", *extra,
                                "--out", str(out))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expect in err and "Traceback" not in err
    assert not out.exists()


def test_console_script_exit_code_is_real(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "memsim.cli", "run", "--hw", str(tmp_path / "x.yaml"),
                           "--model", "gpt2"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"memsim: error: {tmp_path / 'x.yaml'}: file not found"
