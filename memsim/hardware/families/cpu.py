"""CPUs: framework kernels one operator at a time on the cores."""
from memsim.hardware.families import NEVER, Efficiency, Family, register

register(Family(
    name="cpu",
    help="framework CPU kernels, one operator at a time, no separate copy or communication engine",
    execution=(("streams", ("compute",)), ("weight_prefetch", 0), ("pipeline", "none"), ("comm_overlap", 1),
               ("collective_launch", "kernel")),
    compute_efficiency=Efficiency(value=0.5, low=0.3, high=0.8, source=(
        "as xeon-gold-6242: framework GEMMs reach about half of AVX-512 peak; range: small threaded GEMMs to large "
        "MKL GEMMs")),
    memory_efficiency=Efficiency(value=0.7, low=0.6, high=0.85, source=(
        "as xeon-gold-6242: STREAM reaches about 70% of theoretical on Cascade Lake (60-85%)")),
    weights_on_chip=NEVER,
    # ``base: cpu``: the one CPU preset's values, and its own ranges.
    template=("xeon-gold-6242",),
    stack="pytorch-cpu"))
