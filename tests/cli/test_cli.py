"""The command line: the documented contract, outputs, and one-line errors with exit code 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memsim.cli import main as cli


def run_cli(monkeypatch, capsys, *args):
    """The command line's exit code, stdout and stderr (a warning it gives is a line there)."""
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
    code, _stdout, err = run_cli(monkeypatch, capsys, "run", "--hw", hw, *model, "--context", "8", *extra,
                                "--out", str(out))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expect in err and "Traceback" not in err
    assert not out.exists()


def test_console_script_exit_code_is_real(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "memsim.cli.main", "run", "--hw", str(tmp_path / "x.yaml"),
                           "--model", "gpt2"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"memsim: error: {tmp_path / 'x.yaml'}: file not found"


def _one_line(monkeypatch, capsys, tmp_path, *args, expect: str, out_option: str = "--out"):
    """Run a failing command: exit 2, one line on stderr holding ``expect``, nothing written."""
    out = tmp_path / "never"
    code, _, err = run_cli(monkeypatch, capsys, *args, out_option, str(out))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("memsim: error: ") and expect in err, err
    assert not out.exists()
    return err


def _trace(monkeypatch, capsys, tmp_path, tiny_model_path, mutate):
    trace = tmp_path / "t.json"
    run_cli(monkeypatch, capsys, "trace", "--model", str(tiny_model_path), "--context", "8", "-o", str(trace))
    data = json.loads(trace.read_text())
    mutate(data)
    trace.write_text(json.dumps(data))
    return str(trace)


def _kind(data, kind):
    return next(o for o in data["ops"] if o["kind"] == kind)


@pytest.mark.parametrize(("mutate", "expect"), [
    (lambda d: d.update(ops=[]), "t.json: ops: the graph holds no ops"),
    (lambda d: _kind(d, "matmul").pop("dims"), "t.json: ops[L0.qkv].dims.m: an op of kind matmul needs dims"),
    (lambda d: _kind(d, "attention")["dims"].update(heads=0), "t.json: ops[L0.attn].dims.heads: must be at least 1"),
    (lambda d: _kind(d, "matmul")["dims"].update(k=-5), "t.json: ops[L0.qkv].dims.k: must be at least 1, got -5"),
    (lambda d: d["tensors"][0].update(bytes=-1), "bytes: must not be negative"),
    (lambda d: d["ops"][0].update(dtype="bf17"), "dtype: 'bf17' is not a dtype memsim knows"),
])
def test_bad_traces_are_one_line_naming_file_and_op(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path,
                                                    mutate, expect):
    trace = _trace(monkeypatch, capsys, tmp_path, tiny_model_path, mutate)
    _one_line(monkeypatch, capsys, tmp_path, "run", "--hw", str(tiny_chip_path), "--trace", trace, expect=expect)


@pytest.mark.parametrize(("old", "new", "expect"), [
    ("bandwidth: 100 GB/s", "bandwidth: 1e400 TB/s", "levels[hbm].bandwidth: '1e400 TB/s' is out of range"),
    ("fp32: 1 TFLOP/s", "fp32: " + "1" + "0" * 400 + " FLOP/s", "compute.peak.fp32"),
    ("fp32: 1 TFLOP/s", "bf17: 1 TFLOP/s", "compute.peak.bf17: 'bf17' is not a dtype memsim knows"),
    ("efficiency: 0.9}", "efficiency: 0.9, efficiency: 0.8}", "levels[hbm].efficiency: duplicate key 'efficiency'"),
])
def test_bad_hardware_values_are_one_line(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path, old, new,
                                          expect):
    hw = _bad_yaml(tmp_path, tiny_chip_path, old, new)
    _one_line(monkeypatch, capsys, tmp_path, "run", "--hw", hw, "--model", str(tiny_model_path), "--context", "8",
              expect=f"bad.yaml: {expect}")


def test_a_hardware_file_that_is_not_utf8_or_is_a_folder(monkeypatch, capsys, tmp_path, tiny_model_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    model = ("--model", str(tiny_model_path), "--context", "8")
    _one_line(monkeypatch, capsys, tmp_path, "run", "--hw", str(latin), *model,
              expect="latin.yaml: not UTF-8 text (byte 0xe9 on line 1)")
    _one_line(monkeypatch, capsys, tmp_path, "run", "--hw", str(tmp_path), *model,
              expect=f"{tmp_path}: is a directory, not a file")


@pytest.mark.parametrize(("text", "expect"), [
    ("topology: hypercube\n", "sys.yaml: topology: 'hypercube' is not one of"),
    ("link: nvlnk\n", "sys.yaml: link: no link named 'nvlnk' (links: pcie)"),
    ("collective: fastest\n", "sys.yaml: collective: 'fastest' is not one of"),
    ("step_latency: 5\n", "sys.yaml: step_latency: 5 has no unit"),
    ("link: pcie\nlink: pcie\n", "sys.yaml: link: duplicate key"),
])
def test_a_bad_system_file_is_blamed_not_the_preset(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path,
                                                    text, expect):
    system = tmp_path / "sys.yaml"
    system.write_text(text)
    _one_line(monkeypatch, capsys, tmp_path, "run", "--hw", str(tiny_chip_path), "--model", str(tiny_model_path),
              "--context", "8", "--tp", "2", "--system", str(system), expect=expect)


def test_options_that_cause_an_error_are_named(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path):
    model = ("--hw", str(tiny_chip_path), "--model", str(tiny_model_path))
    _one_line(monkeypatch, capsys, tmp_path, "run", *model, "--context", "8", "--tp", "2", "--ep",
              expect="--ep: tiny-llama is a dense model (it has no experts)")
    _one_line(monkeypatch, capsys, tmp_path, "run", *model, "--batch", "65536", "--context", "500",
              expect="--batch/--context: weights and KV cache need")
    _one_line(monkeypatch, capsys, tmp_path, "run", *model, "--batch", str(10**40), expect="--batch: must be at most")


def test_importers_refuse_an_empty_graph_and_write_nothing(monkeypatch, capsys, tmp_path):
    onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
    path = tmp_path / "empty.onnx"
    onnx.save(onnx.helper.make_model(onnx.helper.make_graph([], "empty", [], [])), str(path))
    _one_line(monkeypatch, capsys, tmp_path, "import", "onnx", str(path),
              expect="empty.onnx: ops: the graph holds no ops", out_option="-o")
    pytest.importorskip("google.protobuf", reason="the chakra extra (protobuf) is not installed")
    from memsim.workload.importers.chakra_schema import frame, schema

    et = tmp_path / "empty.et"
    et.write_bytes(frame(schema().GlobalMetadata(version="0.0.4")))
    _one_line(monkeypatch, capsys, tmp_path, "import", "chakra", str(et),
              expect="empty.et: ops: the graph holds no ops", out_option="-o")
    et.write_text("not protobuf, just some words that are long enough to look like a message\n")
    _one_line(monkeypatch, capsys, tmp_path, "import", "chakra", str(et), expect="not a Chakra execution trace",
              out_option="-o")


def _alias_bomb(levels: int = 10) -> str:
    """A YAML flow list of a few hundred bytes whose last item nests nine lists ``levels`` deep
    through aliases: 9**levels strings once expanded."""
    parts = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


@pytest.mark.parametrize("old,field", [("  units: 4", "compute.units"), ("name: tiny", "name")])
def test_a_yaml_alias_bomb_under_a_field_is_one_short_line(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path,
                                                           old, field):
    """A billion-laughs list under a scalar field: the error shows its first items only (issue 20: the
    message's ``repr`` expanded it past 3 GiB before truncating)."""
    indent = old[: len(old) - len(old.lstrip())]
    hw = _bad_yaml(tmp_path, tiny_chip_path, old, f"{indent}{old.split(':')[0].strip()}: {_alias_bomb()}")
    err = _one_line(monkeypatch, capsys, tmp_path, "run", "--hw", hw, "--trace", str(tiny_model_path), expect=field)
    assert len(err) < 400 and "lol" in err


@pytest.mark.parametrize("delay", [0.15, 0.5, pytest.param(2.0, marks=pytest.mark.slow)])
def test_ctrl_c_at_any_moment_is_one_line_and_exit_130(delay):
    """While the libraries load (0.15 s), while the chip loads, while the engine runs: one line, 130."""
    import shutil
    import signal
    import subprocess
    import time

    script = shutil.which("memsim", path=str(Path(sys.executable).parent)) or shutil.which("memsim")
    if script is None:
        pytest.skip("the console script is not installed")
    proc = subprocess.Popen([script, "run", "--model", "llama-3.1-70b", "--tp", "8", "--phase", "prefill", "--prompt",
                             "8192"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # the child must take SIGINT as a shell's foreground job would, however pytest was started
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.decode() == "memsim: interrupted\n", err.decode()[-500:]


def test_a_ctrl_c_that_a_library_wraps_in_its_own_error_is_still_one_line(monkeypatch, capsys):
    """A Ctrl-C in ``__set_name__`` while a library's class is built arrives as a RuntimeError
    whose cause is the KeyboardInterrupt (seen while networkx loads): one line and exit 130."""
    from memsim.cli import console

    def wrapped():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from exc

    import signal

    from memsim.cli import main as cli

    assert console.by_interrupt(RuntimeError("x")) is False
    monkeypatch.setattr(cli, "_invoke", wrapped)  # inside the command line's own handling
    with pytest.raises(SystemExit) as exit_:
        cli.entry()
    assert exit_.value.code == 130 and capsys.readouterr().err == "memsim: interrupted\n"
    monkeypatch.setattr(cli, "entry", wrapped)  # while the command line's libraries load
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as exit_:
            console.entry()
    finally:
        signal.signal(signal.SIGINT, handler)  # the console ignores Ctrl-C once it is done
    assert exit_.value.code == 130 and capsys.readouterr().err == "memsim: interrupted\n"


def test_an_interrupt_python_could_not_raise_still_ends_the_command():
    """A Ctrl-C that lands in a weakref callback (importlib's module locks have one) or a ``__del__``
    is unraisable: Python prints it and runs on to the end (seen once in CI: exit 0 after a
    Ctrl-C at 0.5 s). The console script's hook ends the command: one line, exit code 130."""
    import subprocess

    code = ("import sys\n"
            "from memsim.cli.console import exit_on_lost_interrupt\n"
            "sys.unraisablehook = exit_on_lost_interrupt\n"
            "class Lost:\n"
            "    def __del__(self):\n"
            "        raise KeyboardInterrupt\n"
            "Lost()\n"
            "print('ran on')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "memsim: interrupted\n")


def _console_after(then: str) -> subprocess.CompletedProcess:
    """The console script, its command line replaced by one that sends this process a Ctrl-C,
    catches the KeyboardInterrupt, and then runs ``then`` (one line of Python)."""
    code = ("import os, signal\n"
            "import memsim.cli.main, memsim.cli.console\n"
            "def swallowed():\n"
            "    try:\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "        for _ in range(10**7):\n"
            "            pass\n"
            "    except KeyboardInterrupt:\n"
            "        pass\n"
            f"    {then}\n"
            "memsim.cli.main.entry = swallowed\n"
            "memsim.cli.console.entry()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_a_ctrl_c_a_library_turns_into_an_error_without_a_chain_is_still_one_line():
    """pandas, when a Ctrl-C lands while numpy loads, raises "Unable to import required dependency
    numpy" with no chain back to the interrupt (seen at 0.47 s under load): the console script
    knows one came, and says interrupted, exit code 130, not a traceback."""
    done = _console_after("raise ImportError('Unable to import required dependency numpy')")
    assert (done.returncode, done.stderr) == (130, "memsim: interrupted\n")


def test_a_ctrl_c_a_library_drops_silently_still_ends_the_command():
    """A Ctrl-C that lands where C code clears any error (``PyObject_HasAttr`` or ``PyDict_GetItem``
    calling back into Python) is dropped without a trace, and the command would run on to exit 0
    (seen once in CI: exit 0, nothing on stderr, after a Ctrl-C at 0.15 s). The console script
    knows one came, and ends the command: one line, exit code 130."""
    done = _console_after("print('ran on')")
    assert (done.returncode, done.stdout, done.stderr) == (130, "ran on\n", "memsim: interrupted\n")
