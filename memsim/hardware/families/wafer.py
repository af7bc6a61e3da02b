"""Wafer-scale engines: layers as regions of the wafer that run as a pipeline."""
from memsim.hardware.families import ALWAYS, HBM_STREAMING, Efficiency, Family, register

register(Family(
    name="wafer",
    help="a 2D mesh of cores with local SRAM; layers are regions that run as a pipeline, a prefill flowing "
         "through it in chunks",
    # Its parallelism is the pipeline of regions, not tensor-parallel collectives.
    execution=(("streams", ("compute", "copy", "comm")), ("weight_prefetch", 2), ("pipeline", "layers"),
               ("pipeline_chunks", 32), ("comm_overlap", 1), ("collective_launch", "fused")),
    compute_efficiency=Efficiency(value=0.7, low=0.4, high=0.9, source=(
        "as wse-3; range: below the GPU GEMM rows (a core's SIMD fed from its own SRAM) to the best of them")),
    memory_efficiency=HBM_STREAMING,
    weights_on_chip=ALWAYS,
    # ``base: wafer``: WSE-3's values over the spread of the two wafers.
    template=("wse-3", "wse-2"),
    stack="ideal"))
