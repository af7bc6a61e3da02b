"""The largest inputs memsim accepts: each size that drives a run's cost has a limit, and a larger
input is refused where it is read, in one line naming the limit.

Each limit is set so that a run at it finished within a minute in under 2 GiB on the development
machine (2 cores); ``scripts/bench.py`` prints the time and memory of a run at each. A run's
cost grows with its operators (times the micro-batches it flows through) and, for collectives,
with the ranks a collective spans: a collective's rounds list every transfer (a one-shot
all-reduce over n ranks is a round of n(n - 1)), which the mapping and the engine work out once
per distinct round. The engine then plays a collective alone on its links as one timeout
(``memsim.engine.system``), so ranks cost the mapping's walk of those rounds, not events.
"""
from __future__ import annotations

from memsim.core.errors import ConfigError, MemsimError

MAX_LAYERS = 10_000  # a model config's layers
MAX_OPS = 150_000  # operators in one step's graph (a trace, an import, a built model)
MAX_TASKS = 150_000  # operators times the micro-batches (or prompt chunks) a step flows through
MAX_RANKS = 256  # chips one collective spans: --tp, a trace's tp, an op's ranks, an import's --ranks
MAX_CHIPS = 576  # chips in a run: --tp x --pp, --chips
# Decode steps in a generation (and a draft's): each past the simulated samples is interpolated,
# but the per-step arrays and their sums grow with it; 2^21 steps of Llama-3.2-1B take about 20 s.
MAX_STEPS = 1 << 21
# Points in a sweep (the product of its swept values): a point takes 0.1 to 1 s of a core, so a million
# is days of a machine's time and a results.csv of about a gigabyte; a larger product is refused up front.
MAX_POINTS = 1_000_000
MAX_FACTORS = 8  # memsim explain's factors: each is a rerun for every quantity the run depends on
# A file read whole (a trace, a config, a Chakra trace): memsim's own trace of MAX_OPS ops takes
# about 125 MB; parsing 128 MiB of JSON takes about 10 s and 1 GiB before anything is checked.
MAX_FILE_BYTES = 128 * 2**20
# A YAML config (a chip, a stack, a system, a sweep file): PyYAML parses under 1 MB a second, comments
# included, and the largest shipped config is about 20 KB.
MAX_YAML_BYTES = 4 * 2**20


def check(value: int, limit: int, what: str, field: str | None = None, file: str | None = None,
          error: type[MemsimError] = ConfigError) -> None:
    """Refuse ``value`` ``what`` over ``limit`` (as an ``error``)."""
    if value > limit:
        raise error(f"{value:,} {what} exceed memsim's limit of {limit:,} (memsim/core/limits.py)", field=field, file=file)
