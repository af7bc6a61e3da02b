"""Serving schedulers, each a registered ``Scheduler`` (``SCHEDULERS``): a policy that, given a draft of
an instance's ``State``, returns the next step's ``Batch`` (None when there is nothing to run), with its
declared traits: whether a step may hold part of a prompt (``chunked``: the step is timed as a mixed
step of decodes and prefill chunks) and the instances it serves (``role``). Adding a scheduler is
adding one module to this package that registers itself (``@scheduler``); the shared pieces (admission,
prefills within a budget, decodes that preempt, swapping) are in ``common``. ``Scheduler.decide`` runs
the policy on a draft and returns its ``Decision`` (the batch and the actions that formed it), which the
loop applies to the real state: a policy never changes the state it is asked about.

- ``prefill_first``: iteration-level batching that runs waiting prefills, whole, before decodes (vLLM's
  default before chunked prefill, Orca's iteration-level scheduling).
- ``chunked``: every running sequence decodes, and the token budget (``max_tokens``) left is filled with
  prefill chunks, partial prompts first, then new ones in arrival order (Sarathi-Serve; vLLM's default
  with chunked prefill). A long prompt no longer stalls the decodes for its whole prefill.
- ``static``: a batch is admitted, prefilled together and decoded until every sequence of it is done (as
  ``--phase generate``).
- ``decode_only``: a disaggregated decode instance's; its sequences arrive prefilled, with their KV cache.

When a decode finds no free block the newest running sequence is preempted: by recomputation (its blocks
are freed; it waits at the head of the queue to prefill its prompt and what it had generated) or, with
``preemption: swap`` and room on the host level, by swapping its blocks out, to be swapped back in, before
any new sequence is admitted, when blocks free up.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memsim.core.errors import run_field
from memsim.core.registry import Registry
from memsim.engine.serving_state import Batch, Decision, State

Policy = Callable[[State], Batch | None]
ROLES = ("both", "decode")  # an instance that takes requests (chosen by name), or a disaggregated decode instance


@dataclass(frozen=True, kw_only=True)
class Scheduler:
    """A registered scheduler: its policy and its declared traits."""
    name: str
    policy: Policy
    chunked: bool = False  # a step may hold part of a prompt: it is timed as a mixed step (Sarathi-Serve)
    role: str = "both"  # "decode": a disaggregated decode instance's, not chosen by name

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"scheduler {self.name!r}: role {self.role!r} is not one of {ROLES}")

    def decide(self, state: State) -> Decision:
        """The next step on ``state``, which it leaves as it was: the policy's batch on a draft, and the
        actions the draft recorded."""
        draft = state.draft()
        batch = self.policy(draft)
        return Decision(batch=batch, actions=tuple(draft.actions))


SCHEDULERS: Registry[Scheduler] = Registry("scheduler", field=run_field("scheduler"), package=__name__)


def scheduler(name: str, *, chunked: bool = False, role: str = "both") -> Callable[[Policy], Policy]:
    """Register the decorated policy as the scheduler ``name`` with its traits."""
    def deco(policy: Policy) -> Policy:
        SCHEDULERS.add(name, Scheduler(name=name, policy=policy, chunked=chunked, role=role))
        return policy
    return deco


def chosen() -> tuple[str, ...]:
    """The schedulers a deployment may name (those of the ``both`` role)."""
    return tuple(name for name, s in SCHEDULERS.items() if s.role == "both")
