"""The time and energy of each serving step, from memsim's own engine (``StepTimes``).

A step of decodes alone is timed as a simulated decode of its batch at the mean context (the same KV
bytes read by its attention); one of whole prompts (``prefill_first``), as a prefill of its sequences
at their mean prompt (the same tokens in its GEMMs). A step with prefill chunks (a chunked-prefill
scheduler's: decodes beside prefill chunks, each after the tokens before it) is built by the workload
builder as it is (``StepSpec.mixed``): its GEMMs on all its rows, the decodes' attention in one op at
their mean context (one paged-attention kernel: the same KV bytes), each chunk's at its own.

Shapes are interpolated between simulated steps on grids, each grid point simulated once: decodes on
their batch and the tokens of context they hold (none past what the KV cache holds), a chunk on its
rows (between the two ends of its row tile, ``execution.unit_tile``, where the GEMMs run in the same
waves) and the tokens before it. A step of decodes beside a chunk is composed from those: the chunk's
step and the decodes' step, less the GEMMs each ran on its own rows, plus the GEMMs on all of its rows
and the second attention op it launches; several chunks, as the GEMMs on all their rows and each
chunk's attention. ``check`` reports the error against full simulation of
sampled steps, each chunk then as it was.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from memsim.engine.serving_state import Batch
from memsim.serving.summary import Surrogate

Segments = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, kw_only=True)
class StepCost:
    """One simulated step: its time, its energy and what bounds it (``roofline_bound``: a memory level, a
    link or compute); ``over_cap_w``: how far a chip stayed above its power cap at the lowest clock, where
    no clock held it (``Summary.power_cap_unmet_w``), else 0."""
    seconds: float
    joules: float
    bound: str
    over_cap_w: float = 0.0


class Costs(Protocol):
    """What times the steps (``serving.model.StepModel``): a plain step, or a mixed step's segments."""
    def plain(self, phase: str, batch: int, length: int) -> StepCost: ...

    def mixed(self, segments: Segments) -> StepCost: ...


def grid(n: int, per_octave: int) -> tuple[int, int]:
    """The grid points around ``n`` (1 to 8 exactly, then ``per_octave`` a doubling): the lengths and batches a
    run simulates, each once; between them a step's time is interpolated."""
    if n <= 8:
        return n, n
    octave = 2 ** int(math.log2(n))
    step = max(1, octave // per_octave)
    low = n // step * step
    return low, low if low == n else low + step


def chunk_shape(prefills: tuple[tuple[int, int, int], ...]) -> tuple[int, int, int]:
    """A step's prefill chunks as ``n`` equal chunks of ``p`` tokens between them after ``q`` tokens each, the
    same query-key pairs (attention's work) as the chunks themselves: (p, q, n)."""
    n = len(prefills)
    p = sum(t for _, t, _ in prefills)
    pairs = sum(t * (b + t / 2) for _, t, b in prefills)
    return p, max(0, round(pairs / p - p / (2 * n))) if p else 0, n


def exact_segments(batch: Batch) -> Segments:
    """A batch as the builder runs it in full: its decodes in one attention op at their mean context (one paged
    attention kernel reads every sequence's own KV cache: the same bytes), its prefill chunks in another (one
    variable-length kernel, as serving stacks run every prefill of a step), as equal chunks of the same work
    (``chunk_shape``)."""
    d = len(batch.decodes)
    decodes = ((d, 1, round(sum(c for _, c in batch.decodes) / d)),) if d else ()
    if not batch.prefills:
        return decodes
    p, q, n = chunk_shape(batch.prefills)
    return (*decodes, (n, max(1, round(p / n)), q))


@dataclass(kw_only=True)
class StepTimes:
    """Each batch's time and energy, from the step costs of ``model`` (``model.plain(phase, batch, length)``
    a plain step, ``model.mixed(segments)`` a mixed one). With ``chunked`` every step is timed as a mixed step."""
    model: Costs
    tile: int = 0  # the chip's unit tile (rows): a prefill's time steps with it
    kv_tokens: int = 1 << 62  # tokens the KV cache holds: no grid point is a step that could not be
    chunked: bool = False
    swap_s_per_block: float = 0.0  # a KV block to or from the host level
    cache: dict[tuple, tuple[float, float]] = field(default_factory=dict)
    calls: list[tuple] = field(default_factory=list)  # each step's shape, in order
    times: list[tuple[float, float]] = field(default_factory=list)  # each step's time and energy, in order
    exact: dict[tuple, Segments] = field(default_factory=dict)  # a mixed shape's first step, in full

    def shape(self, batch: Batch) -> tuple:
        if batch.prefills and (self.chunked or batch.decodes):
            d, k = len(batch.decodes), sum(c for _, c in batch.decodes)
            p, q, n = chunk_shape(batch.prefills)
            key = ("mixed", d + p, d, k, q, n)
            if key not in self.exact:
                self.exact[key] = exact_segments(batch)
            return key
        if batch.prefills:
            n = len(batch.prefills)
            return "prefill", n, max(1, round(sum(t for _, t, _ in batch.prefills) / n))
        n = len(batch.decodes)
        return "decode", n, max(1, round(sum(c for _, c in batch.decodes) / n))

    def simulated(self, key: tuple) -> tuple[float, float]:
        if key not in self.cache:
            cost = self.model.mixed(key[1:]) if key[0] == "segments" else self.model.plain(*key)
            self.cache[key] = (cost.seconds, cost.joules)
        return self.cache[key]

    def estimate(self, key: tuple) -> tuple[float, float]:
        if key[0] == "prefill":
            return self._prefill(key[1], key[2])
        if key[0] == "decode":
            _, b, n = key
            return self._decode(b, b * n)
        _, rows, d, k, q, chunks = key
        p = rows - d
        chunked = self._chunks(p, q, chunks)
        if not d:
            return chunked
        # Decodes beside chunks: the chunks' step and the decodes' step, less the GEMMs each ran on its own rows
        # (a decode step at a context of one token), plus the GEMMs on all the rows together, plus the decodes'
        # attention op beside the chunks'.
        parts = (chunked, self._decode(d, k), self._decode(rows, rows), self._decode(p, p), self._decode(d, d),
                 self._second_attention())
        signs = (1, 1, 1, -1, -1, 1)
        return (sum(sg * t for sg, (t, _) in zip(signs, parts)), sum(sg * e for sg, (_, e) in zip(signs, parts)))

    def _chunks(self, p: int, q: int, n: int) -> tuple[float, float]:
        """``n`` prefill chunks in one attention op, ``p`` tokens between them after ``q`` tokens each: on its rows
        (between the ends of their row tile), the tokens before and the chunks (a few points a doubling)."""
        return self._multilinear("chunks", (p, q, n), (self.rows_axis(p), grid(q, 1), grid(n, 1)))

    def _decode(self, b: int, tokens: int) -> tuple[float, float]:
        """``b`` decodes holding ``tokens`` of context between them. The axes are the batch and those tokens (the
        KV bytes its attention reads): a grid point at another batch holds the same tokens, and none holds more
        than the KV cache can, so every grid point is a step the deployment could run (one past the cache would
        spill the KV cache to slower memory)."""
        return self._multilinear("decode", (b, tokens), (self.rows_axis(b), self.tokens_axis(tokens)))

    def _second_attention(self) -> tuple[float, float]:
        """What a second attention op in every layer costs: two one-token decodes as two segments, less as one."""
        two, one = self.simulated(("segments", (1, 1, 1), (1, 1, 1))), self.simulated(("segments", (2, 1, 1)))
        return two[0] - one[0], two[1] - one[1]

    def _multilinear(self, kind: str, value: tuple[int, ...], axes: tuple) -> tuple[float, float]:
        total = [0.0, 0.0]
        for corner in itertools.product((0, 1), repeat=len(axes)):
            weight = 1.0
            point = []
            for side, v, (lo, hi) in zip(corner, value, axes):
                w = (v - lo) / (hi - lo) if hi > lo else 0.0
                weight *= w if side else 1 - w
                point.append(hi if side else lo)
            if weight:
                if kind == "decode":
                    shape: tuple = ("decode", point[0], max(1, point[1] // point[0]))
                else:
                    rows, q, n = point
                    n = min(n, rows)
                    shape = ("segments", (n, max(1, round(rows / n)), q))
                t, e = self.simulated(shape)
                total[0] += weight * t
                total[1] += weight * e
        return total[0], total[1]

    def tokens_axis(self, tokens: int, per_octave: int = 2) -> tuple[int, int]:
        lo, hi = grid(tokens, per_octave)
        return lo, max(tokens, min(hi, self.kv_tokens))

    def rows_axis(self, rows: int) -> tuple[int, int]:
        """The ends of the row tile that ``rows`` fall in, past the first tile: between them the GEMMs run in the
        same waves (within the first, the grid)."""
        if not self.tile or rows <= self.tile:
            return grid(rows, 4)
        return self.tile_ends(rows)

    def tile_ends(self, rows: int) -> tuple[int, int]:
        """The first and last row count of the row tiles ``rows`` fill (``execution.unit_tile`` rows each)."""
        top = -(-rows // self.tile) * self.tile
        return max(1, top - self.tile + 1), top

    def _prefill(self, b: int, n: int) -> tuple[float, float]:
        """A prefill's GEMMs take a time that steps with their row tiles (``execution.unit_tile`` rows of the
        batch's ``b x n`` tokens): interpolated in ``n`` only between the two ends of its tile, where the tile
        count, and so the waves, are the same; simulated at its own shape where the tile is under ``b`` rows."""
        if not self.tile:
            return self.simulated(("prefill", b, n))
        first, last = self.tile_ends(b * n)
        lo, hi = -(-first // b), last // b
        if not lo <= n <= hi or hi - lo < 1:
            return self.simulated(("prefill", b, n))
        w = (n - lo) / (hi - lo)
        a, z = self.simulated(("prefill", b, lo)), self.simulated(("prefill", b, hi))
        return a[0] + w * (z[0] - a[0]), a[1] + w * (z[1] - a[1])

    def __call__(self, batch: Batch) -> float:
        key = self.shape(batch)
        self.calls.append(key)
        t, e = self.estimate(key)
        t += (batch.swap_out + batch.swap_in) * self.swap_s_per_block  # the step waits for its blocks
        self.times.append((t, e))
        return t

    def full(self, key: tuple) -> float:
        """A shape's time in full simulation: a mixed step's segments as they were, else its own shape."""
        return self.cost(key).seconds

    def cost(self, key: tuple) -> StepCost:
        """A shape in full simulation: a mixed step's segments as they were, else its own shape."""
        return self.model.mixed(self.exact[key]) if key[0] == "mixed" else self.model.plain(*key)

    def check(self, samples: int, seed: int = 0) -> Surrogate:
        """The grid points simulated, and the interpolation's relative error in step time against full simulation
        on ``samples`` of the run's step shapes drawn at random (those off the grid points: on them a plain step is
        exact by construction)."""
        grid = len(self.cache)
        shapes = sorted({k for k in self.calls if k[0] == "mixed" or self.estimate(k) != self.cache.get(k)})
        if not shapes or samples < 1:
            return Surrogate(grid_steps=grid, sampled=0, max_error=0.0, mean_error=0.0)
        rng = np.random.default_rng(seed)
        picked = [shapes[i] for i in rng.choice(len(shapes), min(samples, len(shapes)), replace=False)]
        errors = [abs(self.estimate(k)[0] / self.full(k) - 1) for k in picked]
        return Surrogate(grid_steps=grid, sampled=len(picked), max_error=float(max(errors)),
                         mean_error=float(np.mean(errors)))
