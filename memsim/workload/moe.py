"""Mixture-of-experts MLP: a router, then grouped expert GEMMs over the experts a batch touches.

Each token goes to its top-k experts. Under uniform routing, a step with N tokens touches
E x (1 - (1 - k/E)^N) distinct experts on average: only those experts' weights are read,
while every assigned (token, expert) pair is computed.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from memsim.workload.graph import Op, Read

if TYPE_CHECKING:
    from memsim.workload.builder import Builder


def expected_experts(experts: int, top_k: int, tokens: int, held: int | None = None) -> float:
    """Expected number of distinct experts, among the ``held`` ones a rank holds (default: all),
    hit by ``tokens`` tokens each routed to ``top_k`` of ``experts``."""
    held = experts if held is None else held
    if experts <= top_k:
        return float(held)
    return held * (1.0 - (1.0 - top_k / experts) ** tokens)


def moe_mlp(b: Builder, p: str, i: int, h: str) -> str:
    """Router, grouped expert GEMMs and combine. Expert-parallel: each of the ``ep`` ranks holds
    E/ep whole experts, and tokens reach them and come back through two all-to-alls."""
    m, rows = b.m, b.rows
    experts, k = m.experts, m.experts_per_token
    ep = b.s.tp if b.s.expert_parallel else 1
    router = b.matmul(f"{p}.router", i, h, experts, f"{p}.router.out", bias=False)
    assigned = rows * k
    if ep > 1:
        h = _alltoall(b, f"{p}.experts.dispatch", i, h, assigned)
        experts, assigned = experts // ep, -(-assigned // ep)
    active = expected_experts(m.experts, k, rows, held=experts)
    groups = max(1, math.ceil(active))
    per_group = math.ceil(assigned / groups)
    gu = b.act(f"{p}.experts.gate_up.out", 2 * m.intermediate, assigned)
    w_gu = b.projection(f"{p}.experts.gate_up.weight", (experts, m.hidden, 2 * m.intermediate))
    touched = lambda w: Read(w, math.ceil(b.g.tensors[w].bytes * active / experts))
    b.g.add_op(Op(f"{p}.experts.gate_up", "matmul", i, b.s.act_dtype, 2 * assigned * 2 * m.intermediate * m.hidden,
                  (*b.full(h), touched(w_gu), *b.full(router)), (gu,),
                  (("groups", groups), ("k", m.hidden), ("m", per_group), ("n", 2 * m.intermediate))))
    act = b.act(f"{p}.experts.act.out", m.intermediate, assigned)
    elems = assigned * m.intermediate
    b.g.add_op(Op(f"{p}.experts.act", "elementwise", i, b.s.act_dtype, 5 * elems, b.full(gu), (act,),
                  (("elements", elems),)))
    down = b.act(f"{p}.experts.down.out", m.hidden, assigned)
    w_d = b.projection(f"{p}.experts.down.weight", (experts, m.intermediate, m.hidden))
    b.g.add_op(Op(f"{p}.experts.down", "matmul", i, b.s.act_dtype, 2 * assigned * m.hidden * m.intermediate,
                  (*b.full(act), touched(w_d)), (down,),
                  (("groups", groups), ("k", m.intermediate), ("m", per_group), ("n", m.hidden))))
    if ep > 1:
        down = _alltoall(b, f"{p}.experts.gather", i, down, rows * k)
        assigned = rows * k
    out = b.act(f"{p}.experts.combine.out", m.hidden)
    b.g.add_op(Op(f"{p}.experts.combine", "elementwise", i, b.s.act_dtype, 2 * assigned * m.hidden,
                  b.full(down, router), (out,), (("elements", assigned * m.hidden),)))
    return out


def _alltoall(b: Builder, name: str, i: int, x: str, rows: int) -> str:
    """Exchange token rows among the expert-parallel ranks."""
    out = b.act(f"{name}.out", b.m.hidden, rows)
    nbytes = b.g.tensors[out].bytes
    b.g.add_op(Op(name, "alltoall", i, b.s.act_dtype, 0, b.full(x), (out,), (("bytes", nbytes), ("ranks", b.s.tp))))
    return out
