"""``memsim capacity``: its options, generated from ``ServeSpec`` (the deployment and its workload's
shape) and ``CapacitySpec`` (the search), and the call to ``memsim.serving.capacity.find``."""
from __future__ import annotations

import warnings
from dataclasses import fields
from pathlib import Path

import click

from memsim.cli.commands import COMMANDS
from memsim.cli.options import progress_option, spec_options, spec_values
from memsim.core.errors import MemsimError, MemsimWarning, run_field
from memsim.run.chipfile import chip_path
from memsim.run.inputs import files
from memsim.serving.capacity import CapacityResult, CapacitySpec, check_out, find
from memsim.serving.report import step_words
from memsim.serving.spec import ServeSpec, options

SEARCH = list(fields(CapacitySpec))


@click.command("capacity", help=COMMANDS["capacity"])
@progress_option
@spec_options(options("capacity"))
@spec_options(SEARCH)
@click.option("--out", type=click.Path(file_okay=False), help="folder for capacity.json and points.csv")
def capacity_cmd(out, **kwargs):
    search = CapacitySpec(**spec_values(kwargs, SEARCH))
    values = spec_values(kwargs, options("capacity"))
    spec = ServeSpec.make({**values, "hw": chip_path(values["hw"])})
    if out:
        check_out(Path(out), files(spec))
    result = find(spec, search)
    click.echo(console(result))
    for line in result.warned:  # the run at the rate found: its warnings, as any command's
        warnings.warn(MemsimWarning(line), stacklevel=1)
    if out:
        try:
            paths = result.write(Path(out))
        except OSError as exc:
            raise MemsimError(f"cannot write: {exc.strerror or exc}", file=str(out), field=run_field("out")) from None
        for path in paths:
            click.echo(f"wrote {path}")


def console(result: CapacityResult) -> str:
    """The search's lines: what was searched, each rate tried, the answer and what limits it there."""
    spec, cap, found = result.serve, result.spec, result.capacity
    p = cap.percentile
    shape = "fixed" if spec.lengths == "fixed" else f"{spec.lengths}, spread {spec.spread:g}"
    lines = [f"{spec.hw}  {spec.model}  capacity  {spec.layout}; weights {spec.weight_dtype}, KV cache {spec.kv_dtype}",
             f"  requests         {spec.arrival} arrivals for {cap.duration:g} s a rate (the first {cap.warmup:g} s "
             f"a warm-up); prompt {spec.prompt} and output {spec.output_tokens} tokens ({shape}); seed {spec.seed}",
             f"  SLOs             p{p} TTFT <= {spec.slo_ttft:g} s and p{p} TPOT <= {spec.slo_tpot * 1e3:g} ms, "
             "keeping up with arrivals",
             f"  {'rate':>9} {'offered':>9} {'finished':>9} {'TTFT p' + str(p):>11} {'TPOT p' + str(p):>11}  meets"]
    for pt in found.points:
        lines.append(f"  {pt.rate:9.4g} {pt.offered:9.4g} {pt.served:9.4g} {pt.ttft_s * 1e3:8.4g} ms "
                     f"{pt.tpot_s * 1e3:8.4g} ms  {'yes' if pt.met else 'no: ' + pt.why}")
    lines.append(f"capacity         {found.text()}")
    if result.at is not None and result.at.limit is not None:
        lim = result.at.limit
        lines.append(f"  there          {result.at.output_tokens_per_s:.4g} output tokens/s; limited by {lim.by} "
                     f"(the commonest step, {step_words(lim.step)}, bound by {lim.step_bound})")
    return "\n".join(lines)

