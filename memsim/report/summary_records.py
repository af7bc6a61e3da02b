"""The nested records of a run's summary (``memsim.report.summary_fields.Summary``) and how a
record becomes JSON.

A key only some runs have is ``ABSENT`` and left out of the JSON (``plain``); a record keeps its
fields' declared order there. ``Workload`` is the step's ``StepMeta`` with what a whole step of
micro-batches or a generation adds, and, as a trace's ``meta``, leaves out what is unset.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from memsim.workload.meta import StepMeta


class _Absent:
    """A key this run's summary does not have."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


def plain(value: Any) -> Any:
    """``value`` as JSON holds it: a record (a dataclass) as a mapping of its fields in their
    declared order, absent ones left out (a ``Workload``: unset ones); mappings and lists item by item."""
    if isinstance(value, StepMeta):  # a step's meta: what is unset (None) is left out
        return value.as_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(v) for f in fields(value) if (v := getattr(value, f.name)) is not ABSENT}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def present(record: Any) -> dict[str, Any]:
    """A record's fields that it has (not ``ABSENT``), by name, in their declared order; the
    values as they are (records stay records)."""
    return {f.name: v for f in fields(record) if (v := getattr(record, f.name)) is not ABSENT}


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic:
    """The bytes a level or link moved in a step and the time it was held. A level's ``total``
    splits into ``compulsory`` and ``capacity`` bytes; a link's and a chip's rows do not split."""
    read: int
    written: int
    total: int
    compulsory: int = ABSENT
    capacity: int = ABSENT
    busy_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StackUsed:
    """The runtime stack a run is on (``Summary.stack``)."""
    name: str
    description: str
    launch: str
    default: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """The tensor-parallel ranks and pipeline stages the chips form."""
    tp: int
    pp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCounts:
    """What the engine did (``Summary.engine``)."""
    events: int
    simulated_ops: int
    replayed_ops: int
    records: int
    transfers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Energy:
    """Joules of all the run's chips (``Summary.energy_j``): ``total`` = ``dynamic`` + ``static``, the
    dynamic part split into ``compute``, each level's and each link's."""
    total: float
    dynamic: float
    static: float
    compute: float
    levels: dict[str, float]
    links: dict[str, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Speculated:
    """A speculative step's (or generation's) figures (``Summary.speculative``)."""
    draft: str
    draft_k: int
    accept: float
    draft_cost: float | None
    tokens_per_step: float
    draft_step_s: float
    verify_step_s: float
    step_s: float
    time_per_token_s: float
    tokens_per_s_per_sequence: float
    tokens_per_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeSample:
    """A decode step a generation simulated (``Summary.decode_samples``)."""
    context: int
    step_time_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class GridTried:
    """A grid a ``--chips N`` search considered (``Summary.grid_search``): its roofline where it fits,
    its time where it was simulated, else why it was ``skipped``."""
    tp: int
    pp: int
    roofline_s: float = ABSENT
    simulated_s: float = ABSENT
    skipped: str = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload(StepMeta):
    """What the step is of (``Summary.workload``): its graph's ``StepMeta`` and, with micro-batches,
    their count (``batch`` or ``tokens`` then are the whole step's); a generation's ``prompt`` and
    ``generate``."""
    microbatches: int | None = None
    prompt: int | None = None
    generate: int | None = None

    @classmethod
    def of(cls, meta: StepMeta, **changes: Any) -> Workload:
        """``meta`` as a summary's workload, with ``changes``."""
        return cls(**{**{f.name: getattr(meta, f.name) for f in fields(meta)}, **changes})


@dataclass(frozen=True, slots=True, kw_only=True)
class Sensitive:
    """An estimate a run was rerun at the ends of its range (``Estimates.sensitive``): the step
    time and energy at its low and high ends, and the largest relative swing of each."""
    field: str
    value: str
    range: tuple[str, str]
    step_time_s: tuple[float, float]
    energy_j: tuple[float, float]
    step_swing: float
    energy_swing: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimates:
    """The estimated preset values a result rests on (``Summary.estimates``): ``count`` the chip and
    stack have, the YAML paths of those ``used``, the ``sensitive`` ones rerun, largest swing first,
    and over every one used the step time's ``band_s``; the efficiencies its family filled in
    (``defaults``); the run's work where the console did not rerun it by default (``not_rerun``)."""
    count: int
    used: tuple[str, ...]
    sensitive: tuple[Sensitive, ...] = ()
    band_s: tuple[float, float] = ABSENT
    defaults: tuple[str, ...] = ABSENT
    not_rerun: int = ABSENT


RECORDS = (Traffic, StackUsed, Grid, EngineCounts, Energy, Speculated, DecodeSample, GridTried, Workload, Sensitive,
           Estimates)  # the summary's nested records
