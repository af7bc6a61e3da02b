"""With several chips, every figure the console prints says whose it is: a chip's, a chip of each
stage summed, or all chips' (the scope each summary key declares)."""
from __future__ import annotations

from memsim import simulate
from memsim.report.summary_fields import FIELDS, STEP, SYSTEM, scope_tag
from memsim.run.table import RENDER, table


def test_a_multi_chip_runs_figures_say_whose_they_are(tiny_chip_path, tiny_model_path):
    one = table(simulate(str(tiny_chip_path), str(tiny_model_path), context=16).summary)
    assert "[" not in one  # one chip: nothing to tell apart
    two = simulate(str(tiny_chip_path), str(tiny_model_path), context=16, tp=2).summary
    lines = table(two).splitlines()
    first = {line.split()[0]: line for line in reversed(lines)}
    assert first["FLOPs"].endswith("[a chip]") and first["energy"].endswith("[all 2 chips]")
    assert first["step"].endswith("ms")  # the step is the step: no tag
    staged = table(simulate(str(tiny_chip_path), str(tiny_model_path), context=16, tp=2, pp=2).summary)
    assert "[a chip of each of the 2 stages, summed]" in staged and "[all 4 chips]" in staged


def test_every_figure_the_console_prints_declares_whose_it_is():
    shown = {name for name in RENDER if FIELDS[name].metadata["unit"] not in ("text", "object")
             or name in ("bytes_per_level", "placement", "stall_s", "energy_j")}
    unscoped = {n for n in shown if FIELDS[n].metadata["scope"] == STEP}
    # the step's own figures (its time, its roofline, a generation's rates, the chip count) are no chip's
    assert unscoped <= {"step_time_s", "roofline_s", "chips", "ttft_s", "power_limited"}, unscoped
    assert scope_tag(SYSTEM, 8, 2) == "all 8 chips" and scope_tag(SYSTEM, 1, 1) == ""
