"""The columns of ``timeline.csv`` and ``ops.csv``, declared once with what each means.

``frames`` writes the tables in this order, ``tests/report/test_columns.py`` checks that every
column a run writes is declared here, and ``docs/columns.md`` is generated from it
(``reference``; ``python scripts/reference.py --write``). A column per memory level or link is
declared with ``<level>`` in its name.
"""
from __future__ import annotations

import re

TIMELINE: dict[str, str] = {
    "start_s": "interval start, seconds",
    "end_s": "interval end, seconds",
    "chip": "chip id (`chip0`, ...; the first rank of each pipeline stage)",
    "stream": "the chip's stream the operator ran on: `compute`, `copy` or `comm` (docs/how-it-works.md)",
    "resource": "`compute` (the chip's compute units); a memory level or `link:NAME` for transfers; `dequant` for "
                "the unpacking of weight-only formats",
    "kind": "`compute`, `transfer`, `stall`, or `dequant` (unpacking a weight-only format on the `dequant` resource, "
            "beside compute; not counted in `compute_busy_s`)",
    "op": "the operator the interval belongs to",
    "op_kind": "its kind (`gemm`, `attention`, `allreduce`, ...)",
    "layer": "its layer (-1 outside the repeated layers)",
    "bytes": "bytes moved (transfers), the total over the row's `count`",
    "flops": "FLOPs done (compute), the total over the row's `count`",
    "src": "where a transfer comes from: `hbm` for a load, `sram` for a store, `ddr` for RDU staging, `chip0` for an "
           "inter-chip transfer",
    "dst": "where it goes",
    "cause": "for a stall, why compute is idle (docs/outputs.md, Stall causes)",
    "holder": "for a stall caused by contention, the operator that held the resource",
    "count": "how many consecutive, identical chunk intervals the row stands for",
    "busy_s": "transfers: the time the row's transfers held its level or link, exactly; their sum over a resource is "
              "its `busy_s` in `summary.json`. 0 for other rows",
    "energy_j": "dynamic energy of the row's work: a compute row's FLOPs, a `dequant` row's unpacking, a transfer "
                "row's bits at its level's or link's `energy`; 0 for stalls",
}

OPS: dict[str, str] = {
    "op": "operator name",
    "op_kind": "its kind (including `allreduce`, `allgather` and `sendrecv`)",
    "layer": "its layer (-1 outside the repeated layers)",
    "chip": "the chip that runs it (the first rank of its pipeline stage)",
    "start_s": "when it started, seconds",
    "end_s": "when it ended, launch overhead included",
    "duration_s": "`end_s - start_s`",
    "flops": "its FLOPs; summed over the rows, `summary.json`'s `flops_total`",
    "<level>_read_bytes": "bytes read from a level (`hbm_read_bytes`) or over a link (`link:fabric_read_bytes`), "
                          "re-fetches included",
    "<level>_written_bytes": "bytes written to that level or over that link",
    "<level>_compulsory_bytes": "of those, what the operator moves with unlimited SRAM (each operand once)",
    "<level>_capacity_bytes": "the re-fetches its tiles add because SRAM is finite (0 for a copy, send or collective)",
    "arithmetic_intensity": "FLOPs per byte moved off chip",
    "roofline_s": "its bound: the largest of its FLOPs at peak and its bytes at each level's or link's peak bandwidth",
    "bound": "the term that sets `roofline_s`: `compute`, a level or a link (a collective: its link)",
    "tile": "the tile the mapping chose: `tm`/`tn` for GEMMs, `block_rows`/`passes` for attention",
    "dynamic_energy_j": "the dynamic energy of its FLOPs and of every byte it moved, on every tensor-parallel rank "
                        "of its stage",
    "energy_j": "`dynamic_energy_j` plus its share of the static energy, in proportion to the time it held a compute "
                "stream; summed over the rows, `summary.json`'s `energy_j.total`",
}
TIMELINE_COLUMNS = list(TIMELINE)


def declared(column: str, table: dict[str, str]) -> bool:
    """Whether a column a run wrote is one the table declares (a per-level column by its pattern)."""
    if column in table:
        return True
    return any(re.fullmatch(re.escape(key).replace("<level>", ".+"), column) for key in table if "<level>" in key)


def reference() -> str:
    """``docs/columns.md``, from the declarations."""
    out = ["# Columns of ops.csv and timeline.csv", "",
           "Generated from `memsim/report/columns.py` by `python scripts/reference.py --write`; "
           "`tests/report/test_columns.py` keeps it current. What the rows mean and how they add up: "
           "[outputs.md](outputs.md).", ""]
    for title, table in (("timeline.csv: one row per interval", TIMELINE),
                         ("ops.csv: one row per operator, in execution order", OPS)):
        out += [f"## {title}", "", "| column | meaning |", "|---|---|"]
        out += [f"| `{name}` | {meaning} |" for name, meaning in table.items()]
        out.append("")
    return "\n".join(out)
