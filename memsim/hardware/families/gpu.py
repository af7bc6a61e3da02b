"""GPUs: a kernel per operator on CUDA/HIP streams, weights in HBM."""
from memsim.hardware.families import HBM_STREAMING, WITHOUT_DEVICE_MEMORY, Efficiency, Family, register

register(Family(
    name="gpu",
    help="one kernel per operator in stream order, with copy engines and a collective stream; weights in device "
         "memory (in SRAM only on a chip with none)",
    # CUDA/HIP streams with copy engines and a collective stream; kernels see weights in HBM.
    # Serving stacks (vLLM, TensorRT-LLM) run a tensor-parallel all-reduce after its GEMM;
    # overlapping them (Megatron/TransformerEngine userbuffers, Flux, T3) is an opt-in.
    execution=(("streams", ("compute", "copy", "comm")), ("weight_prefetch", 0), ("pipeline", "none"),
               ("comm_overlap", 1), ("collective_launch", "kernel")),
    compute_efficiency=Efficiency(value=0.75, low=0.6, high=0.87, source=(
        "mean of the NVIDIA GEMM rows 1-3, 7-9 of microbench.csv; range: their spread, lower for a small part "
        "(as gb10)")),
    # What a serving stack's kernels reach of that inside a model step: the fit on calibration.csv.
    kernel_efficiency=Efficiency(value=0.84, low=0.7, high=1.0, source=(
        "the fit on all 30 rows of calibration.csv (docs/validation.md, Calibration: 0.845), as every calibrated GPU "
        "preset; range: the leave-one-source-out fits (0.78 to 0.865) widened down to 0.7 and up to the "
        "microbenchmark rate, 1")),
    memory_efficiency=HBM_STREAMING,
    weights_on_chip=WITHOUT_DEVICE_MEMORY,
    # ``base: gpu``: a datacenter GPU with HBM, H100's values over the spread of the five datacenter GPUs.
    template=("h100-sxm", "a100-80gb-sxm", "h200-sxm", "b200", "mi300x"),
    stack="vllm"))
