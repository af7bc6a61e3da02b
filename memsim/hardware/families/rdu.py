"""Dataflow chips (an RDU, an LPU): fused kernels, weights streamed into on-chip memory ahead of use."""
from memsim.hardware.families import ALWAYS, HBM_STREAMING, Efficiency, Family, register

register(Family(
    name="rdu",
    help="dataflow: fused kernels, the next operators' weights streamed in while the current ones compute, "
         "weights kept in on-chip memory",
    # The next operators' weights stream in while the current ones compute, and the compiler
    # schedules a GEMM's output out over the chip network as it is produced. No family runs a
    # ``branch`` stream by default: frameworks issue a parallel block's attention and MLP one
    # after the other, and on one chip the two share its compute units and memory (measured:
    # GPT-J on sn40l and h100-sxm gains at most 5%, and a prefill can lose). A collective is part
    # of the fused kernel that computes its input: it pays no launch.
    execution=(("streams", ("compute", "copy", "comm")), ("weight_prefetch", 2), ("pipeline", "none"),
               ("comm_overlap", 4), ("collective_launch", "fused")),
    compute_efficiency=Efficiency(value=0.7, low=0.5, high=0.9, source=(
        "as sn40l and groq-lpu; range: the GEMM rows' spread over chips (microbench.csv rows 1-14: 0.51 MI300X to "
        "0.87 A100)")),
    memory_efficiency=HBM_STREAMING,
    weights_on_chip=ALWAYS,
    # ``base: rdu``: SN40L's values over the spread of the two dataflow chips.
    template=("sn40l", "groq-lpu"),
    stack="ideal"))
