"""Measure GEMMs, attention and a Llama-2-7B step on a CUDA GPU with PyTorch.

These are the measurements behind memsim/validation/data/measured.csv
(docs/validation.md, "Measured here"). The script needs a CUDA GPU and
PyTorch; memsim does not import it. Run it as

    OUT=dir python scripts/gpu_measure.py [--quick]

It writes l2.csv, gemm.csv, kscan.csv, attention.csv, e2e.csv, compiled.csv, kernels.json and env.json
under $OUT, each row as soon as it is measured, and prints a short table.

How each time is taken:
- ``graph``: twenty back-to-back calls captured in one CUDA graph, the
  replay timed with CUDA events and divided by twenty (the device's time
  per kernel, warm L2, no host launch in the way);
- ``cold``: ``triton.testing.do_bench`` median, which flushes the L2
  before each call and times each call with events (as tritonbench does);
- ``loop``: a host loop of back-to-back eager calls between two events
  (as superbench's cublaslt_gemm loop runs: the host's launch is in it
  when the kernel is shorter than the launch).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

DEV = "cuda"
OUT = os.environ.get("OUT", ".")
GRAPH_CALLS = 20


class Sink:
    """One CSV under $OUT, each row flushed as it is written."""

    def __init__(self, name: str, fields: list[str]) -> None:
        self.handle = open(os.path.join(OUT, name), "w", newline="")
        self.writer = csv.DictWriter(self.handle, fieldnames=fields)
        self.writer.writeheader()

    def row(self, **values: object) -> None:
        self.writer.writerow(values)
        self.handle.flush()


def captured(fn, calls: int):
    """A CUDA graph of ``calls`` back-to-back calls of fn, warmed up on a side stream first."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def graph_time(fn) -> float:
    """Seconds per call of fn, replayed GRAPH_CALLS at a time in a graph."""
    graph = captured(fn, GRAPH_CALLS)
    seconds = event_median(graph.replay, 7) / GRAPH_CALLS
    del graph
    return seconds


def cold_time(fn) -> float:
    """Seconds per call with the L2 flushed before each (do_bench median)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=5, rep=30, return_mode="median") / 1e3


def loop_time(fn, calls: int = 50) -> float:
    """Seconds per call of a host loop of eager calls with no sync inside."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def kernel_names(fn) -> list[str]:
    """The CUDA kernels one call of fn launches, by name."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return [e.name for e in events]


def gemm_fn(m: int, n: int, k: int, dtype: str):
    """A call of one GEMM (A is M x K row-major, B is K x N), and its inputs."""
    if dtype == "bf16":
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b)
    a = torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=DEV)
    return lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)


def gemm_shapes(quick: bool) -> list[tuple[int, int, int, str]]:
    if quick:
        return [(1024, 1024, 1024, "bf16"), (64, 4096, 4096, "bf16"), (1024, 1024, 1024, "fp8")]
    shapes = []
    for size in (1024, 2048, 4096, 8192):
        shapes += [(size, size, size, "bf16"), (size, size, size, "fp8")]
    shapes += [(802816, 192, 768, "bf16"), (802816, 192, 768, "fp8")]
    llama7b = ((12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008))
    for rows in (1, 16, 64, 128, 256, 512, 1024, 2048, 4096):
        shapes += [(rows, n, k, "bf16") for n, k in llama7b]
    for rows in (64, 128, 4096):
        shapes += [(rows, 7168, 16384, "fp8"), (rows, 2112, 7168, "fp8")]
    return shapes


def kscan_shapes(quick: bool) -> list[tuple[int, int, int, str]]:
    """GEMMs whose K alone varies, to separate a tile's fixed cost from its cost per step of K."""
    depths = (256, 1024) if quick else (128, 256, 512, 768, 1536, 3072, 6144)
    return [(m, n, k, dtype) for dtype in ("bf16", "fp8") for m, n in ((802816, 192), (4096, 4096))
            for k in depths]


def measure_kscan(quick: bool, kernels: dict) -> None:
    measure_gemms(quick, kernels, kscan_shapes(quick), "kscan.csv")


def measure_gemms(quick: bool, kernels: dict, shapes: list | None = None, name: str = "gemm.csv") -> None:
    sink = Sink(name, ["m", "n", "k", "dtype", "flops", "graph_s", "cold_s", "loop_s", "graph_tflops", "kernels"])
    for m, n, k, dtype in shapes or gemm_shapes(quick):
        label = f"gemm {dtype} {m}x{n}x{k}"
        try:
            fn = gemm_fn(m, n, k, dtype)
            names = kernel_names(fn)
            graph_s, cold_s, loop_s = graph_time(fn), cold_time(fn), loop_time(fn)
        except Exception as error:  # one shape's failure is logged, not fatal
            print(f"{label}: {error!r}", file=sys.stderr)
            continue
        flops = 2.0 * m * n * k
        kernels[label] = names
        sink.row(m=m, n=n, k=k, dtype=dtype, flops=flops, graph_s=graph_s, cold_s=cold_s,
                 loop_s=loop_s, graph_tflops=flops / graph_s / 1e12, kernels=" | ".join(names))
        print(f"{label:34s} graph {graph_s * 1e6:9.1f} us  cold {cold_s * 1e6:9.1f} us  "
              f"loop {loop_s * 1e6:9.1f} us  {flops / graph_s / 1e12:7.1f} TFLOP/s  {names[:2]}",
              flush=True)
        torch.cuda.empty_cache()


def attention_cases(quick: bool):
    seqs = (512, 2048) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    for head_dim in (128,) if quick else (128, 64):
        for causal in (False, True):
            for seq in seqs:
                yield "prefill", 16384 // seq, 16, seq, seq, head_dim, causal
    for batch, keys in ((1, 1024), (1, 4096), (16, 1024), (16, 4096), (64, 1024), (64, 4096)):
        yield "decode", batch, 32, 1, keys, 128, False


def measure_attention(quick: bool, kernels: dict) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sink = Sink("attention.csv", ["phase", "backend", "batch", "heads", "queries", "keys",
                                  "head_dim", "causal", "flops", "bytes", "cold_s", "graph_s",
                                  "tflops", "kernels"])
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for phase, batch, heads, queries, keys, head_dim, causal in attention_cases(quick):
        q = torch.randn(batch, heads, queries, head_dim, device=DEV, dtype=torch.bfloat16)
        k = torch.randn(batch, heads, keys, head_dim, device=DEV, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        pairs = queries * keys * (0.5 if causal else 1.0)
        flops = 4.0 * batch * heads * pairs * head_dim
        moved = 2.0 * (2 * q.numel() + k.numel() + v.numel())
        for name, backend in backends.items():
            label = f"attn {phase} {name} b{batch} h{heads} q{queries} k{keys} d{head_dim} c{int(causal)}"

            def fn(backend=backend, q=q, k=k, v=v, causal=causal):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            try:
                names = kernel_names(fn)
                cold_s = cold_time(fn)
                graph_s = graph_time(fn)
            except Exception as error:
                print(f"{label}: {error!r}", file=sys.stderr)
                continue
            kernels[label] = names
            sink.row(phase=phase, backend=name, batch=batch, heads=heads, queries=queries,
                     keys=keys, head_dim=head_dim, causal=causal, flops=flops, bytes=moved,
                     cold_s=cold_s, graph_s=graph_s, tflops=flops / cold_s / 1e12,
                     kernels=" | ".join(names))
            print(f"{label:52s} cold {cold_s * 1e6:9.1f} us  graph {graph_s * 1e6:9.1f} us  "
                  f"{flops / cold_s / 1e12:7.1f} TFLOP/s  {moved / cold_s / 1e12:6.2f} TB/s",
                  flush=True)
        del q, k, v
        torch.cuda.empty_cache()


def read_kernel():
    """A Triton kernel in which every program sums its share of a buffer ``passes`` times: the
    buffer's read bandwidth from wherever it sits (the L2 when it fits, else HBM)."""
    import triton
    import triton.language as tl

    @triton.jit
    def read(x_ptr, out_ptr, n_elements, passes, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        programs = tl.num_programs(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for _ in range(passes):
            for start in range(pid * BLOCK, n_elements, programs * BLOCK):
                offsets = start + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
        tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)

    return read


def measure_l2(quick: bool, kernels: dict) -> None:
    """Read bandwidth over buffers from well inside the L2 to well past it."""
    sink = Sink("l2.csv", ["kind", "bytes", "passes", "programs", "graph_s", "tbps"])
    read = read_kernel()
    block = 2048
    programs = 8 * torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(programs * block, device=DEV, dtype=torch.float32)
    sizes_mib = (4, 16) if quick else (2, 4, 8, 16, 24, 32, 40, 48, 64, 128, 512, 4096)
    for mib in sizes_mib:
        x = torch.randn(mib * 2**19, device=DEV, dtype=torch.bfloat16)  # mib MiB of bf16
        passes = max(1, 256 // mib)
        reference = x.float().sum().item() * passes

        def fn(x=x, passes=passes):
            read[(programs,)](x, out, x.numel(), passes, BLOCK=block)

        try:
            fn()
            torch.cuda.synchronize()
            if not math.isclose(out.sum().item(), reference, rel_tol=1e-2, abs_tol=1e-2 * x.numel() ** 0.5):
                print(f"l2 read {mib} MiB: wrong sum {out.sum().item()} vs {reference}", file=sys.stderr)
            seconds = graph_time(fn)
        except Exception as error:  # one size's failure is logged, not fatal
            print(f"l2 read {mib} MiB: {error!r}", file=sys.stderr)
            continue
        moved = x.nbytes * passes
        sink.row(kind="read", bytes=moved, passes=passes, programs=programs, graph_s=seconds,
                 tbps=moved / seconds / 1e12)
        print(f"read {mib:5d} MiB x {passes:3d}  {seconds * 1e6:9.2f} us  {moved / seconds / 1e12:6.2f} TB/s",
              flush=True)
        del x
        torch.cuda.empty_cache()


class Llama:
    """Llama-2-7B's shapes with random bf16 weights, written in plain PyTorch."""

    def __init__(self, layers: int) -> None:
        def weight(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, device=DEV, dtype=torch.bfloat16) / math.sqrt(shape[0])

        self.layers = [
            {"n1": torch.ones(4096, device=DEV, dtype=torch.bfloat16),
             "wqkv": weight(4096, 12288), "wo": weight(4096, 4096),
             "n2": torch.ones(4096, device=DEV, dtype=torch.bfloat16),
             "w13": weight(4096, 22016), "w2": weight(11008, 4096)}
            for _ in range(layers)
        ]
        self.embed = weight(32000, 4096)
        self.norm = torch.ones(4096, device=DEV, dtype=torch.bfloat16)
        self.head = weight(4096, 32000)

    @staticmethod
    def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        first, second = x[..., :64], x[..., 64:]
        return torch.cat((first * cos - second * sin, second * cos + first * sin), -1)

    def weights(self) -> dict:
        return {"layers": self.layers, "embed": self.embed, "norm": self.norm, "head": self.head}

    def forward(self, tokens: torch.Tensor, caches, start: int, weights: dict | None = None) -> torch.Tensor:
        """A step; ``weights`` (as ``weights()`` lays them out) replaces the model's own."""
        weights = weights or self.weights()
        batch, length = tokens.shape
        x = weights["embed"][tokens]
        angles = torch.arange(start, start + length, device=DEV, dtype=torch.float32)[:, None]
        angles = angles * torch.pow(1e4, -torch.arange(64, device=DEV) / 64.0)[None, :]
        cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
        for index, w in enumerate(weights["layers"]):
            h = F.rms_norm(x, (4096,), w["n1"], 1e-5)
            qkv = (h @ w["wqkv"]).view(batch, length, 3, 32, 128).permute(2, 0, 3, 1, 4)
            q, k, v = self.rope(qkv[0], cos, sin), self.rope(qkv[1], cos, sin), qkv[2]
            if caches is None:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                kc, vc = caches[index]
                kc[:, :, start:start + length] = k
                vc[:, :, start:start + length] = v
                o = F.scaled_dot_product_attention(q, kc, vc)
            o = o.transpose(1, 2).reshape(batch * length, 4096)
            x = torch.addmm(x.view(-1, 4096), o, w["wo"]).view(batch, length, 4096)
            h = F.rms_norm(x, (4096,), w["n2"], 1e-5)
            gate, up = (h @ w["w13"]).chunk(2, -1)
            x = torch.addmm(x.view(-1, 4096), (F.silu(gate) * up).view(-1, 11008),
                            w["w2"]).view(batch, length, 4096)
        last = F.rms_norm(x[:, -1], (4096,), weights["norm"], 1e-5)
        return last @ weights["head"]


def event_median(fn, runs: int) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def measure_llama(quick: bool, kernels: dict) -> None:
    sink = Sink("e2e.csv", ["model", "phase", "batch", "tokens", "context", "launch",
                            "seconds", "kernels_per_step"])
    layers = 4 if quick else 32
    model = Llama(layers)
    name = f"llama-2-7b-shaped ({layers} layers)"
    with torch.inference_mode():
        for tokens in ((128,) if quick else (128, 512, 2048)):
            ids = torch.randint(0, 32000, (1, tokens), device=DEV)

            def prefill(ids=ids):
                return model.forward(ids, None, 0)

            seconds = event_median(prefill, 5)
            names = kernel_names(prefill)
            kernels[f"e2e prefill {tokens}"] = names
            sink.row(model=name, phase="prefill", batch=1, tokens=tokens, context=0,
                     launch="eager", seconds=seconds, kernels_per_step=len(names))
            print(f"prefill {tokens:5d} tokens eager {seconds * 1e3:8.3f} ms  "
                  f"{len(names)} kernels", flush=True)
        cases = ((1, 1024),) if quick else ((1, 1024), (1, 4096), (16, 1024), (16, 4096), (64, 1024))
        for batch, context in cases:
            caches = [(torch.randn(batch, 32, context, 128, device=DEV, dtype=torch.bfloat16),
                       torch.randn(batch, 32, context, 128, device=DEV, dtype=torch.bfloat16))
                      for _ in range(layers)]
            ids = torch.randint(0, 32000, (batch, 1), device=DEV)

            def decode(ids=ids, caches=caches, context=context):
                return model.forward(ids, caches, context - 1)

            eager = event_median(decode, 7)
            names = kernel_names(decode)
            graph = graph_step(decode)
            kernels[f"e2e decode b{batch} ctx{context}"] = names
            for launch, seconds in (("eager", eager), ("graph", graph)):
                sink.row(model=name, phase="decode", batch=batch, tokens=1, context=context,
                         launch=launch, seconds=seconds, kernels_per_step=len(names))
            print(f"decode b{batch:3d} ctx {context:5d} eager {eager * 1e3:8.3f} ms  "
                  f"graph {graph * 1e3:8.3f} ms  {len(names)} kernels", flush=True)
            del caches
            torch.cuda.empty_cache()


class CompiledStep(torch.nn.Module):
    """A decode step of ``Llama`` with its weights and a static KV cache as the module's buffers,
    as gpt-fast holds them, so that torch.compile's CUDA graphs can replay it."""

    def __init__(self, model: Llama, batch: int, context: int) -> None:
        super().__init__()
        self.model, self.context = model, context
        self.names = [tuple(layer) for layer in model.layers]
        for index, layer in enumerate(model.layers):
            for name, tensor in layer.items():
                self.register_buffer(f"w{index}_{name}", tensor)
            for kind in ("k", "v"):
                self.register_buffer(f"{kind}{index}", torch.randn(batch, 32, context, 128, device=DEV,
                                                                   dtype=torch.bfloat16))
        for name in ("embed", "norm", "head"):
            self.register_buffer(name, getattr(model, name))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        caches = [(getattr(self, f"k{i}"), getattr(self, f"v{i}")) for i in range(len(self.names))]
        layers = [{name: getattr(self, f"w{i}_{name}") for name in names} for i, names in enumerate(self.names)]
        weights = {"layers": layers, "embed": self.embed, "norm": self.norm, "head": self.head}
        return self.model.forward(ids, caches, self.context - 1, weights)


def measure_compiled(quick: bool, kernels: dict) -> None:
    """gpt-fast's way: a decode step compiled with torch.compile(mode="reduce-overhead"), which
    fuses the elementwise work into Triton kernels and replays the step as a CUDA graph."""
    sink = Sink("compiled.csv", ["model", "batch", "context", "seconds", "compile_s", "kernels_per_step"])
    layers = 4 if quick else 32
    model = Llama(layers)
    for batch, context in ((1, 1024),) if quick else ((1, 1024), (16, 1024)):
        module = CompiledStep(model, batch, context)
        step = torch.compile(module, mode="reduce-overhead", fullgraph=True)
        ids = torch.randint(0, 32000, (batch, 1), device=DEV)
        started = time.time()
        with torch.no_grad():
            for _ in range(4):
                step(ids)
            torch.cuda.synchronize()
            compile_s = time.time() - started
            seconds = event_median(lambda step=step, ids=ids: step(ids), 20)
            names = kernel_names(lambda step=step, ids=ids: step(ids))
        kernels[f"compiled decode b{batch} ctx{context}"] = names
        sink.row(model=f"llama-2-7b-shaped ({layers} layers)", batch=batch, context=context, seconds=seconds,
                 compile_s=compile_s, kernels_per_step=len(names))
        print(f"compiled decode b{batch:3d} ctx {context:5d} {seconds * 1e3:8.3f} ms  compile {compile_s:6.1f} s  "
              f"{len(names)} kernels", flush=True)
        del module, step
        torch.cuda.empty_cache()


def graph_step(fn) -> float:
    """Median seconds of one graph replay of fn (one whole step)."""
    graph = captured(fn, 1)
    seconds = event_median(graph.replay, 10)
    del graph
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few small cases, to check the script")
    parser.add_argument("--only", choices=("l2", "gemm", "kscan", "attention", "e2e", "compiled"), action="append")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    env = {"device": props.name, "sms": props.multi_processor_count,
           "l2_bytes": getattr(props, "L2_cache_size", None), "memory_bytes": props.total_memory,
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d")}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    with open(os.path.join(OUT, "env.json"), "w") as handle:
        json.dump(env, handle, indent=1)
    print(json.dumps(env), flush=True)
    kernels: dict = {}
    steps = {"l2": measure_l2, "gemm": measure_gemms, "kscan": measure_kscan, "attention": measure_attention,
             "e2e": measure_llama, "compiled": measure_compiled}
    for name, step in steps.items():
        if args.only and name not in args.only:
            continue
        started = time.time()
        try:
            step(args.quick, kernels)
        except Exception:  # keep what the other steps measure
            traceback.print_exc()
        with open(os.path.join(OUT, "kernels.json"), "w") as handle:
            json.dump(kernels, handle, indent=1)
        print(f"# {name} took {time.time() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
