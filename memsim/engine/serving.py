"""A serving run on SimPy: requests arrive, each instance's scheduler forms its next step's batch from
its waiting and running sequences, the step takes the time its ``step_time`` gives for the work (memsim's
own engine, through ``memsim.serve``), and each sequence's tokens and KV blocks advance with it.

A deployment is one or more instances (``Instance``): replicas that each serve whole requests, or, for
disaggregated serving (Splitwise, DistServe), prefill instances whose sequences, once prefilled, are sent
with their KV cache (``handoff`` gives the transfer's time) to the least loaded decode instance. A request
goes to the least loaded instance that takes new requests. Arrivals are the requests' own times (an open
loop), or ``users`` clients that each send a request ``think_s`` after their last one finished (a closed
loop, as a benchmark at fixed concurrency). Schedulers and the KV cache's state: ``engine.schedulers``,
``engine.serving_state``.

The loop runs on an integer clock in picoseconds, as the engine does: times given in seconds (arrivals,
step times, handoffs, think time, the front end) enter it rounded to the picosecond, so equal times stay
equal however they were summed, and the rows leave it in seconds.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy

from memsim.core import progress
from memsim.core.errors import ConfigError
from memsim.core.units import PS_PER_S, ps_of
from memsim.engine.schedulers import SCHEDULERS
from memsim.engine.sequence import Seq
from memsim.engine.serving_state import Batch, HostWork, Limits, State
from memsim.engine.simpy_fast import Environment


@dataclass(frozen=True, kw_only=True)
class Instance:
    """A group of chips that runs its own steps: ``role`` both (whole requests), prefill or decode;
    ``step_time`` gives a batch's time on the device, ``host`` what the stack's host adds to it."""
    scheduler: str
    limits: Limits
    step_time: Callable[[Batch], float]
    role: str = "both"
    host: HostWork = field(default_factory=HostWork)


@dataclass(kw_only=True)
class Counter:
    """Requests in the system (arrived, not finished) and the integral of their count over time: its mean
    is, by Little's law, the arrival rate times the mean time in system."""
    now: int = 0
    area: int = 0  # requests x picoseconds
    since: int = 0
    done: int = 0
    finished: Callable[[int], Any] = lambda n: None  # told of each request that finishes (a progress bar)

    def add(self, at: int, change: int) -> None:
        self.area += self.now * (at - self.since)
        self.now, self.since = self.now + change, at
        if change < 0:
            self.done += 1
            self.finished(1)


def serve(requests: Iterable, scheduler: str, limits: Limits, step_time: Callable[[Batch], float],
          users: int = 0, think_s: float | Sequence[float] = 0.0) -> tuple[list[Seq], list[dict], float]:
    """One instance: see ``serve_instances``."""
    return serve_instances(requests, [Instance(scheduler=scheduler, limits=limits, step_time=step_time)],
                           users=users, think_s=think_s)


def serve_instances(requests: Iterable, instances: Sequence[Instance], handoff: Callable[[Seq], float] | None = None,
                    users: int = 0, think_s: float | Sequence[float] = 0.0,
                    starts_s: Sequence[float] = ()) -> tuple[list[Seq], list[dict], float]:
    """Simulate every request from arrival to last token; returns the sequences (with their times), one row per
    step (instance, start, end, sequences, tokens, blocks used, waiting) and the time integral of the requests
    in the system. A closed loop (``users`` > 0): client ``u`` sends its first request at ``starts_s[u]`` (0
    where none is given) and each next one ``think_s`` after its last finished (a number, or one for each
    request: the think time before it)."""
    for inst in instances:
        SCHEDULERS.get(inst.scheduler)  # an unknown name: one line naming the known ones
    entry = [i for i, inst in enumerate(instances) if inst.role in ("both", "prefill")]
    decoders = [i for i, inst in enumerate(instances) if inst.role == "decode"]
    if not entry or (handoff is None) != (not decoders):
        raise ConfigError("a deployment needs an instance that takes requests, and decode instances exactly "
                          "when prefill instances hand off to them", field="instances")
    env = Environment()  # the engine's: its clock, now_ps, in whole picoseconds
    seqs = [Seq(id=r.id, arrival_ps=ps_of(r.arrival_s), prompt=r.prompt, output=r.output, prefix_id=r.prefix_id,
                prefix=r.prefix) for r in requests]
    states = [State(limits=inst.limits) for inst in instances]
    for seq in seqs:
        for i in entry + decoders:
            need = states[i].blocks_for(seq.prompt + (seq.output if instances[i].role != "prefill" else 1))
            lim = instances[i].limits  # a sequence preempted and recomputed is admitted again above the watermark
            if need > lim.kv_blocks - lim.watermark_blocks:
                raise ConfigError(f"request {seq.id} needs {need} KV blocks of {lim.block_tokens} tokens, more than "
                                  f"the {lim.kv_blocks - lim.watermark_blocks} the deployment admits ({lim.kv_blocks} "
                                  f"less the stack's watermark of {lim.watermark_blocks})", field=f"requests[{seq.id}]")
    steps: list[dict] = []
    count = Counter()
    wake = [env.event() for _ in instances]
    finished: list[simpy.Event] = []
    calls = [0]  # steps timed so far: a step's row names its call (step_time may be shared)

    def enqueue(i: int, seq: Seq) -> None:
        states[i].waiting.append(seq)
        seq.instance = i
        if not wake[i].triggered:
            wake[i].succeed()

    def least_loaded(among: list[int]) -> int:
        return min(among, key=lambda i: (states[i].load, i))

    front = ps_of(instances[entry[0]].host.frontend_s)  # the front end a request passes before a scheduler sees it
    thinks = [ps_of(think_s)] * len(seqs) if isinstance(think_s, (int, float)) else [ps_of(t) for t in think_s]
    if len(thinks) != len(seqs):
        raise ConfigError(f"{len(thinks)} think times for {len(seqs)} requests", field="think")
    starts = [ps_of(t) for t in starts_s]

    def arrive(seq: Seq) -> None:
        seq.arrival_ps = env.now_ps
        count.add(env.now_ps, +1)
        if front:
            env.timeout(front).callbacks.append(lambda _: enqueue(least_loaded(entry), seq))
        else:
            enqueue(least_loaded(entry), seq)

    def open_loop():
        for seq in seqs:
            if seq.arrival_ps > env.now_ps:
                yield env.timeout(seq.arrival_ps - env.now_ps)
            arrive(seq)

    def closed_loop(user: int):
        if user < len(starts) and starts[user]:
            yield env.timeout(starts[user])
        for k in range(user, len(seqs), users):
            seq = seqs[k]
            arrive(seq)
            yield finished[k]
            if k + users < len(seqs) and thinks[k + users]:
                yield env.timeout(thinks[k + users])

    def send(seq: Seq):
        assert handoff is not None
        start = env.now_ps
        yield env.timeout(ps_of(handoff(seq)))
        seq.handoff_ps = env.now_ps - start
        enqueue(least_loaded(decoders), seq)

    def run(i: int):
        inst, state = instances[i], states[i]
        chosen = SCHEDULERS.get(inst.scheduler)
        rounds = inst.host.multi_step
        k = 0  # the step's place in its scheduling round (multi-step decoding)
        while count.done < len(seqs):
            mid = rounds > 1 and k % rounds and state.running  # no admission within a round
            held = state.waiting
            if mid:
                state.waiting = deque()
            decision = chosen.decide(state)  # the policy decides on a draft ...
            state.apply(decision, seqs)  # ... and the loop applies what it decided
            batch = decision.batch
            if mid:
                state.waiting = deque([*state.waiting, *held])  # a preempted sequence first
            if batch is None:
                k = 0
                wake[i] = env.event()
                yield wake[i] | all_done
                continue
            start = env.now_ps
            for seq_id, _, _ in batch.prefills:
                if seqs[seq_id].scheduled_ps is None:
                    seqs[seq_id].scheduled_ps = start
            call = calls[0]
            calls[0] += 1
            alone = bool(batch.prefills)  # a step with prefills is a round of its own (vLLM V0's multi-step)
            device = inst.step_time(batch)
            took = ps_of(inst.host.step_s(device, batch, alone or k % rounds == 0, alone or (k + 1) % rounds == 0))
            yield env.timeout(took)
            k = 0 if alone else k + 1
            for seq in advance(state, batch, seqs, env.now_ps, inst.role == "prefill"):
                if seq.generated >= seq.output:
                    seq.end_ps = env.now_ps
                    count.add(env.now_ps, -1)
                    if users:
                        finished[seq.id].succeed()
                else:  # prefilled on a prefill instance: to a decode instance
                    env.process(send(seq))
            if count.done == len(seqs) and not all_done.triggered:
                all_done.succeed()
            steps.append({"call": call, "instance": i, "start_s": start / PS_PER_S, "end_s": env.now_ps / PS_PER_S,
                          "prefills": len(batch.prefills), "decodes": len(batch.decodes), "tokens": batch.tokens,
                          "host_s": (took - ps_of(device)) / PS_PER_S,
                          "kv_blocks_used": inst.limits.kv_blocks - state.free, "running": len(state.running),
                          "waiting": len(state.waiting), "swapped_blocks": batch.swap_out + batch.swap_in})

    all_done = env.event()
    if users:
        finished.extend(env.event() for _ in seqs)
        for u in range(min(users, len(seqs))):
            env.process(closed_loop(u))
    else:
        env.process(open_loop())
    procs = [env.process(run(i)) for i in range(len(instances))]
    with progress.bar(len(seqs), "request", "serving") as shown:  # requests served, as they finish
        count.finished = shown.update
        env.run(until=simpy.AllOf(env, procs))
    return seqs, steps, count.area / PS_PER_S


def advance(state: State, batch: Batch, seqs: list[Seq], now: int, hands_off: bool = False) -> list[Seq]:
    """Each prefill chunk's tokens are in the cache; a prefill that completes gives the sequence its next token
    (its first, or after a recomputation its context back); each decode gives one more. Returns the sequences
    that leave the instance: finished, or with ``hands_off`` (a prefill instance) prefilled."""
    for seq_id, tokens, before in batch.prefills:
        seq = seqs[seq_id]
        seq.prefilled = before + tokens
        if seq.decoding:
            if seq.first_token_ps is None:
                seq.first_token_ps = now
            seq.generated += 1
            seq.recompute = 0
            seq.token(now)
    for seq_id, _ in batch.decodes:
        seq = seqs[seq_id]
        seq.generated += 1
        seq.token(now)
    leaving = [s for s in state.running if s.generated >= s.output or (hands_off and s.decoding)]
    for seq in leaving:
        state.release(seq)
    return leaving
