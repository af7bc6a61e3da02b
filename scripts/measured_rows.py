"""Turn a scripts/gpu_measure.py run into rows of measured.csv (microbench.csv's columns).

    python scripts/measured_rows.py [RUN_DIR] [--write]

RUN_DIR holds the run's gemm.csv, kscan.csv (GEMMs whose K alone varies), attention.csv, l2.csv,
launch_cost.csv (scripts/launch_cost.cu) and env.json (default: the H200 run of 2026-11-28 under
memsim/validation/data). Without --write
the rows are printed; with it they replace memsim/validation/data/measured.csv.
tests/test_validate.py checks that the file is what this script writes from the run it names.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "memsim" / "validation" / "data"
RUN = DATA / "h200-2026-11-28"
COLUMNS = ("id", "chip", "benchmark", "dtype", "shape_or_size", "measured_value", "unit",
           "peak_value_from_datasheet", "fraction_of_peak", "system", "software", "source_url_or_repo_path",
           "source_locator", "confidence", "notes")
PEAKS = {"bf16": 989.0, "fp8": 1979.0}  # TFLOP/s, dense (hardware.csv, H200 = H100 compute)
SOURCE = "scripts/gpu_measure.py (this repository), run kept in memsim/validation/data/{run}"


def _row(env: dict, run: str, **fields: str) -> dict:
    system = f"1 {env['device']} ({env['sms']} SMs), lent machine of this workplace"
    software = f"PyTorch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, scripts/gpu_measure.py"
    return {"chip": "h200-sxm", "system": system, "software": software, "peak_value_from_datasheet": "",
            "fraction_of_peak": "", "source_url_or_repo_path": SOURCE.format(run=run), "confidence": "high",
            **fields}


def _read(run_dir: Path, name: str) -> list[dict]:
    with (run_dir / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


def gemm_row(r: dict, env: dict, run: str, file: str = "gemm.csv") -> dict:
    tflops = float(r["flops"]) / float(r["graph_s"]) / 1e12
    peak = PEAKS[r["dtype"]]
    kernels = r["kernels"].replace("Memset (Device) | ", "").split(" | ")
    names = " + ".join(name.split("<")[0].removeprefix("void ") for name in kernels)
    return _row(
        env, run, benchmark="gemm", dtype=r["dtype"],
        shape_or_size=f"M={r['m']} N={r['n']} K={r['k']}", measured_value=f"{tflops:.1f}", unit="TFLOP/s",
        peak_value_from_datasheet=f"{peak:g}", fraction_of_peak=f"{tflops / peak:.3f}",
        source_locator=f"{file} row m={r['m']} n={r['n']} k={r['k']} {r['dtype']}",
        notes=(f"cuBLAS(Lt) through torch.matmul (bf16) or torch._scaled_mm (fp8, bf16 out); time per call "
               f"of 20 calls replayed in one CUDA graph, {float(r['graph_s']) * 1e6:.1f} us (L2 flushed "
               f"before each call: {float(r['cold_s']) * 1e6:.1f} us; eager host loop: "
               f"{float(r['loop_s']) * 1e6:.1f} us); kernels: {names}; clocks.csv logs the SM clock "
               f"and power over the sweep (the large GEMMs drew up to ~690 W of the 700 W cap and ran "
               f"at 1260-1980 MHz; clocks_kscan.csv for kscan.csv)"))


def attention_row(r: dict, env: dict, run: str) -> dict:
    causal = r["causal"] == "True"
    tflops = float(r["flops"]) / float(r["cold_s"]) / 1e12
    kernel = {"cudnn": "cuDNN fused attention (sm90 wgmma)",
              "flash": "FlashAttention-2 (PyTorch's flash backend, no wgmma)"}[r["backend"]]
    return _row(
        env, run, benchmark="attention", dtype="bf16",
        shape_or_size=(f"{kernel} forward, batch={r['batch']} heads={r['heads']} seq={r['keys']} "
                       f"head_dim={r['head_dim']}, {'causal' if causal else 'non-causal'}"),
        measured_value=f"{tflops:.1f}", unit="TFLOP/s", peak_value_from_datasheet="989",
        fraction_of_peak=f"{tflops / 989:.3f}",
        source_locator=(f"attention.csv row {r['backend']} b{r['batch']} seq {r['keys']} d{r['head_dim']} "
                        f"causal {causal}"),
        notes=(f"F.scaled_dot_product_attention under sdpa_kernel({r['backend']}); median of "
               f"triton.testing.do_bench with the L2 flushed before each call, "
               f"{float(r['cold_s']) * 1e6:.1f} us; TFLOP/s = 4 x batch x heads x seq^2 x head_dim"
               f"{' / 2' if causal else ''} / time"))


def l2_row(r: dict, env: dict, run: str) -> dict:
    mib = int(r["bytes"]) // int(r["passes"]) // 2**20
    return _row(
        env, run, benchmark="cache_bandwidth" if mib <= 48 else "read_bandwidth", dtype="bf16",
        shape_or_size=f"read of a {mib} MiB buffer, {r['passes']} passes", unit="TB/s",
        measured_value=f"{float(r['tbps']):.2f}", source_locator=f"l2.csv row {mib} MiB",
        notes=(f"a Triton kernel ({r['programs']} programs) sums the buffer {r['passes']} times; time of "
               f"20 calls replayed in one CUDA graph; the L2 holds up to ~24 MiB at full rate "
               f"(60 MiB in all, two partitions)"))


def launch_row(r: dict, env: dict, run: str) -> dict:
    what = r["what"].replace("_", " ")
    shape = f", M=N=K={r['m']}" if int(r["m"]) else ""
    host_bound = float(r["device_us"]) <= 1.05 * float(r["host_us"])
    pace = "the host sets the pace" if host_bound else "the kernels set the pace"
    return _row(
        env, run, benchmark="launch", dtype="", shape_or_size=f"{what}{shape}, back to back",
        unit="us", measured_value=f"{float(r['host_us']):.2f}", source_locator=f"launch_cost.csv row {r['what']}"
        f"{shape}", software=f"CUDA {env['cuda']} (nvcc, cuBLASLt), scripts/launch_cost.cu",
        source_url_or_repo_path=SOURCE.format(run=run).replace("gpu_measure.py", "launch_cost.cu"),
        notes=(f"{r['calls']} calls with no synchronisation until an end event; host wall clock per call "
               f"{float(r['host_us']):.2f} us, device events per call {float(r['device_us']):.2f} us "
               f"({pace}); host: a virtualised Intel Xeon (16 CPUs)"))


def rows(run_dir: Path) -> list[dict]:
    env = json.loads((run_dir / "env.json").read_text())
    run = run_dir.name
    out = [gemm_row(r, env, run) for r in _read(run_dir, "gemm.csv")]
    out += [gemm_row(r, env, run, "kscan.csv") for r in _read(run_dir, "kscan.csv")]
    out += [attention_row(r, env, run) for r in _read(run_dir, "attention.csv") if r["phase"] == "prefill"]
    out += [l2_row(r, env, run) for r in _read(run_dir, "l2.csv")]
    out += [launch_row(r, env, run) for r in _read(run_dir, "launch_cost.csv")]
    return [{"id": f"h{i}", **r} for i, r in enumerate(out, start=1)]


def text(run_dir: Path) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows(run_dir))
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", type=Path, default=RUN)
    ap.add_argument("--write", action="store_true", help="replace memsim/validation/data/measured.csv")
    args = ap.parse_args()
    out = text(args.run)
    if args.write:
        (DATA / "measured.csv").write_text(out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
