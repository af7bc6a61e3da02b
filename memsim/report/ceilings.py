"""The roofline of a chip: its compute ceilings (the matrix peak of each dtype it gives, and the
vector peak) and its memory ceilings (each level's and link's peak bandwidth, a host level's as its
link allows), with the ridge point of each pair: the arithmetic intensity at which a kernel stops
being bound by that memory. Both roofline figures (``run_plots``, ``html``) draw from here."""
from __future__ import annotations

from dataclasses import dataclass

from memsim.hardware import rates
from memsim.hardware.resource import Ref
from memsim.hardware.spec import ChipSpec


@dataclass(frozen=True)
class Ceilings:
    compute: tuple[tuple[str, float], ...]  # (dtype or "vector", FLOP/s), highest first
    memory: tuple[tuple[str, float], ...]  # (level or link:NAME, B/s), highest first
    main: str  # the memory level the chip's weights stream from (its first device or host memory)

    def ridge(self, dtype: str | None = None, level: str | None = None) -> float:
        """FLOP per byte at which the ``dtype`` ceiling (default: the highest) meets ``level``'s (default: main)."""
        flops = dict(self.compute)[dtype] if dtype else self.compute[0][1]
        return flops / dict(self.memory)[level or self.main]

    def distinct(self) -> tuple[tuple[str, float], ...]:
        """The compute ceilings with one label each: those of equal rate under one (``int8, fp8``),
        highest first, so no two labels print over each other."""
        out: dict[float, list[str]] = {}
        for name, flops in self.compute:
            out.setdefault(flops, []).append(name)
        return tuple((", ".join(names), flops) for flops, names in out.items())


def run_dtype(chip: ChipSpec, weight_dtype: str | None) -> str:
    """The dtype a run's GEMMs compute in, as the roofline draws its ridge for: its weights' where the
    chip computes them natively, else its activations' (bf16), at the rate the chip gives for it
    (``ComputeSpec.peak``: its fallback where it gives none of its own)."""
    return chip.compute.peak_dtype(chip.compute.matmul_dtype("bf16", weight_dtype or "bf16"))


def ceilings(chip: ChipSpec) -> Ceilings:
    compute = sorted([*chip.compute.peak_flops_per_s, ("vector", chip.compute.vector_flops_per_s)],
                     key=lambda kv: -kv[1])
    memory = [(lvl.name, float(rates.peak_bandwidth(chip, Ref.level(lvl.name)))) for lvl in chip.levels]
    memory += [(f"link:{link.name}", float(link.peak_bandwidth)) for link in chip.links]
    homes = [lvl.name for lvl in chip.levels if not lvl.kind_of.on_chip]
    return Ceilings(compute=tuple((k, float(v)) for k, v in compute),
                    memory=tuple(sorted(memory, key=lambda kv: -kv[1])), main=(homes or [chip.scratchpad.name])[0])
