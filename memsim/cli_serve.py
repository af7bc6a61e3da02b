"""``memsim serve``: its options and the call to ``memsim.serving`` (``cli.py`` adds it to the command line)."""
from __future__ import annotations

from pathlib import Path

import click

from memsim.engine.schedulers import SCHEDULERS
from memsim.engine.serving_state import PREEMPTION
from memsim.errors import MemsimError


@click.command("serve")
@click.option("--hw", default="h100-sxm", show_default=True, help="preset name or path to a hardware YAML")
@click.option("--model", default="llama-3.1-8b", show_default=True, help="model name in configs/models or a config.json")
@click.option("--weight-dtype", default="bf16", show_default=True, help="weight format")
@click.option("--kv-dtype", default="bf16", show_default=True, help="KV-cache format")
@click.option("--tp", default=1, show_default=True, type=int, help="tensor-parallel ranks: chips to an instance")
@click.option("--pp", default=1, show_default=True, type=int,
              help="pipeline stages to an instance (run as that many virtual engines)")
@click.option("--replicas", default=1, show_default=True, type=int, help="instances serving whole requests")
@click.option("--prefill-instances", "prefill", default=0, show_default=True, type=int,
              help="disaggregated serving: instances that prefill (with --decode-instances)")
@click.option("--decode-instances", "decode", default=0, show_default=True, type=int,
              help="disaggregated serving: instances that decode, sent each KV cache over --handoff-link")
@click.option("--handoff-link", default="", help="chip link a KV cache is sent over (default: the chip's interconnect)")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="override a hardware field, repeatable")
@click.option("--requests", "trace", type=click.Path(dir_okay=False), help="request trace CSV (docs/serving.md)")
@click.option("--rate", default=1.0, show_default=True, type=float, help="synthetic arrivals: requests a second")
@click.option("--count", default=100, show_default=True, type=int, help="synthetic arrivals: how many requests")
@click.option("--arrival", default="poisson", show_default=True, type=click.Choice(["poisson", "gamma"]),
              help="synthetic arrivals: exponential gaps, or gamma gaps of --burstiness coefficient of variation")
@click.option("--burstiness", default=1.0, show_default=True, type=float, help="gamma arrivals: the gaps' CV")
@click.option("--prompt", default=512, show_default=True, type=int, help="synthetic: prompt tokens (median)")
@click.option("--output-tokens", "output_tokens", default=128, show_default=True, type=int,
              help="synthetic: output tokens (median)")
@click.option("--lengths", default="fixed", show_default=True, type=click.Choice(["fixed", "uniform", "lognormal"]),
              help="synthetic: how lengths vary around --prompt and --output")
@click.option("--spread", default=0.5, show_default=True, type=float, help="uniform: +- fraction; lognormal: sigma")
@click.option("--prefix", default=0, show_default=True, type=int, help="synthetic: prompt tokens every request shares")
@click.option("--seed", default=0, show_default=True, type=int, help="synthetic: the random seed")
@click.option("--users", default=0, show_default=True, type=int,
              help="a closed loop: this many clients, each sending its next request when its last is done")
@click.option("--think", default=0.0, show_default=True, type=float, help="closed loop: seconds between a client's requests")
@click.option("--stack", default="auto", show_default=True,
              help="runtime stack (memsim list stacks): its kernels, collectives, host work per step and serving policies")
@click.option("--scheduler", default=None, type=click.Choice(list(SCHEDULERS)),
              help="batching policy (docs/serving.md)")
@click.option("--preemption", default="recompute", show_default=True, type=click.Choice(list(PREEMPTION)),
              help="a preempted sequence's KV cache: recomputed, or swapped to the host level")
@click.option("--block-tokens", default=16, show_default=True, type=int, help="tokens in one KV-cache block")
@click.option("--max-seqs", default=None, type=int, help="sequences in one step at most (default: the stack's)")
@click.option("--max-tokens", default=None, type=int,
              help="tokens computed in one step at most (chunked: the step's token budget)")
@click.option("--prefix-caching", is_flag=True, help="share the KV blocks of a common prefix")
@click.option("--slo-ttft", default=1.0, show_default=True, type=float, help="goodput: time to first token, s")
@click.option("--slo-tpot", default=0.1, show_default=True, type=float, help="goodput: time per output token, s")
@click.option("--out", type=click.Path(file_okay=False), help="folder for requests.csv, steps.csv and serve.json")
def serve_cmd(hw, model, weight_dtype, kv_dtype, tp, pp, replicas, prefill, decode, handoff_link, sets, trace, rate, count,
              arrival, burstiness, prompt, output_tokens, lengths, spread, prefix, seed, users, think, stack, scheduler,
              preemption, block_tokens, max_seqs, max_tokens, prefix_caching, slo_ttft, slo_tpot, out):
    """Simulate requests arriving at a deployment: continuous batching, a paged KV cache, latency percentiles."""
    from memsim.cli import _writing
    from memsim.serving import files_read, simulate_serving
    from memsim.serving_report import check_out, summary_table

    if out:
        check_out(Path(out), files_read(hw, model, stack, trace))
    try:
        result = simulate_serving(hw, model, requests=trace, rate=rate, count=count, arrival=arrival,
                                  burstiness=burstiness, prompt=prompt, output=output_tokens, lengths=lengths,
                                  spread=spread, prefix=prefix, seed=seed, users=users, think_s=think,
                                  weight_dtype=weight_dtype, kv_dtype=kv_dtype, tp=tp, pp=pp, replicas=replicas,
                                  prefill=prefill, decode=decode, handoff_link=handoff_link, set=list(sets),
                                  stack=stack, scheduler=scheduler, preemption=preemption,
                                  block_tokens=block_tokens, max_seqs=max_seqs, max_tokens=max_tokens,
                                  prefix_caching=prefix_caching, slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot)
    except MemsimError as exc:  # name the flag, not the keyword
        exc.field = FLAGS.get(str(exc.field), exc.field)
        raise
    click.echo(summary_table(result.summary))
    if out:
        for path in _writing("--out", out, lambda: result.write(out)):
            click.echo(f"wrote {path}")


# The keywords memsim.serve names in its errors, as the command line's flags.
FLAGS = {"requests": "--count", "rate": "--rate", "arrival": "--arrival", "burstiness": "--burstiness",
         "spread": "--spread", "prompt": "--prompt", "output": "--output-tokens", "prefix": "--prefix", "seed": "--seed",
         "lengths": "--lengths",
         "block_tokens": "--block-tokens", "max_seqs": "--max-seqs", "max_tokens": "--max-tokens",
         "slo_ttft_s": "--slo-ttft", "slo_tpot_s": "--slo-tpot", "scheduler": "--scheduler", "hw": "--hw",
         "preemption": "--preemption", "replicas": "--replicas", "pp": "--pp", "prefill": "--prefill-instances",
         "decode": "--decode-instances", "handoff_link": "--handoff-link", "users": "--users", "think_s": "--think",
         "stack": "--stack"}
