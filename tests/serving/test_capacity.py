"""Capacity at an SLO: the search, held to an analytic answer; censored results; a warm-up and a
duration in a serving run; the command."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memsim
from memsim.core.errors import ConfigError
from memsim.engine.serving import Limits, serve
from memsim.serving.capacity import AT_LEAST, BELOW, FOUND, CapacitySpec, Point, find, search
from memsim.serving.report import header
from memsim.serving.spec import ServeSpec
from memsim.workload.requests import synthetic
from tests.cli.test_cli import run_cli
from tests.conftest import TINY_MODEL

STEP_S, OUTPUT = 0.01, 4  # each request alone: a prefill and three decodes of one step each
SERVICE_S = OUTPUT * STEP_S  # so one instance of one sequence serves 1 / SERVICE_S = 25 requests a second
SLO_S = 10 * STEP_S


def analytic(rate: float) -> Point:
    """A deployment whose capacity is known: one sequence at a time, every step STEP_S, arrivals almost
    evenly spaced (gamma gaps of coefficient of variation 0.01) for 200 s."""
    reqs = synthetic(1, rate, duration=200.0, arrival="gamma", burstiness=0.01, prompt=8, output=OUTPUT, seed=5)
    seqs, _, _ = serve(reqs, "prefill_first", Limits(kv_blocks=64, max_seqs=1), lambda batch: STEP_S)
    ttft = np.percentile([s.first_token_s - s.arrival_s for s in seqs], 90)
    return Point(rate=rate, offered=rate, served=rate, requests=len(seqs), ttft_s=float(ttft), tpot_s=STEP_S,
                 met=bool(ttft <= SLO_S), why="")


@pytest.fixture()
def model(tmp_path):
    """The tiny model with room for a serving run's KV probe."""
    path = tmp_path / "tiny-serving.json"
    path.write_text(json.dumps({**TINY_MODEL, "max_position_embeddings": 8192}))
    return str(path)


def test_the_search_finds_an_analytic_capacity_within_one_bisection_step():
    found = search(analytic, start=1.0, least=0.01, most=1024.0, bisect=4)
    assert found.bound == FOUND
    assert found.rate <= 1 / SERVICE_S <= found.failed
    assert found.failed - found.rate <= 16.0 / 2**4  # the bracket 16-32 req/s, bisected four times
    assert [p.rate for p in found.points][:6] == [1, 2, 4, 8, 16, 32]  # doubled until it failed


def test_a_search_that_never_fails_or_never_meets_says_so():
    every = search(lambda r: Point(rate=r, offered=r, served=r, requests=1, ttft_s=0, tpot_s=0, met=True, why=""),
                   start=1.0, least=0.5, most=64.0, bisect=3)
    assert every.bound == AT_LEAST and every.rate == 64.0 and every.text().startswith(">= 64 req/s")
    none = search(lambda r: Point(rate=r, offered=r, served=r, requests=1, ttft_s=9, tpot_s=0, met=False, why="x"),
                  start=1.0, least=0.25, most=64.0, bisect=3)
    assert none.bound == BELOW and none.rate == 0 and none.failed == 0.25 and none.text().startswith("< 0.25 req/s")
    assert [p.rate for p in none.points] == [1.0, 0.5, 0.25]


def test_the_search_is_checked_before_it_runs():
    with pytest.raises(ConfigError, match="warmup: must be shorter than duration"):
        CapacitySpec(duration=10, warmup=10)
    with pytest.raises(ConfigError, match="percentile: must be one of 50, 90, 99"):
        CapacitySpec(percentile=95)
    with pytest.raises(ConfigError, match="start: must lie from"):
        CapacitySpec(start=2048)
    with pytest.raises(ConfigError, match=r"duration: .* more requests than memsim serves in one run"):
        find(ServeSpec(hw="h100-sxm", model="gpt2", check=0), CapacitySpec(duration=1e9, warmup=1, start=1, least=1))


def test_a_warm_up_leaves_its_requests_out_and_the_rates_say_what_was_offered_and_served(model):
    r = memsim.serve("h100-sxm", model, rate=20, duration=5.0, warmup=1.0, prompt=32, output_tokens=8,
                     check=0)
    s, reqs = r.summary, r.requests
    assert s.warmup_requests > 0 and s.requests == len(reqs) and (reqs.arrival_s >= 1.0).all()
    assert s.requests + s.warmup_requests == len(synthetic(1, 20, duration=5.0, prompt=32, output=8))
    assert s.offered_requests_per_s == pytest.approx(20, rel=0.35)  # a Poisson draw of 80 requests
    assert s.served_requests_per_s == pytest.approx(s.offered_requests_per_s, rel=0.3)  # light load keeps up
    assert s.itl_s_p50 > 0 and s.itl_s_p99 >= s.itl_s_p50 and (reqs.itl_s_max >= s.itl_s_p50 * 0.5).all()
    assert s.itl_s_mean == pytest.approx(np.average(reqs.tpot_s, weights=reqs.output_tokens - 1), rel=1e-6)
    with pytest.raises(ConfigError, match="warmup: no request arrives after the 9 s warm-up"):
        memsim.serve("h100-sxm", model, rate=2, duration=1.0, warmup=9.0, check=0)
    with pytest.raises(ConfigError, match="duration: draws open-loop arrivals"):
        memsim.serve("h100-sxm", model, users=2, duration=1.0)


def test_the_command_reports_a_censored_capacity_and_writes_its_points(monkeypatch, capsys, model, tmp_path):
    out = tmp_path / "cap"
    code, stdout, stderr = run_cli(monkeypatch, capsys, "capacity", "--model", model, "--prompt", "32", "--output-tokens", "8",
                                   "--duration", "3", "--warmup", "0.5", "--start", "1", "--most", "4", "--out",
                                   str(out))
    assert code == 0, stderr
    assert "capacity         >= 4 req/s (every rate tried met the SLOs)" in stdout
    assert "p90 TTFT <= 1 s and p90 TPOT <= 100 ms" in stdout
    written = json.loads((out / "capacity.json").read_text())
    assert written["capacity"]["bound"] == "at least" and written["capacity"]["rate"] == 4.0
    assert written["at_capacity"]["requests"] > 0 and written["slo"]["percentile"] == 90
    assert (out / "points.csv").read_text().splitlines()[0].startswith("rate,offered,served,requests,ttft_s,tpot_s")
    code, _, stderr = run_cli(monkeypatch, capsys, "capacity", "--model", model, "--users", "2")
    assert code == 2 and "--users" in stderr


def test_a_tight_slo_brackets_the_capacity_between_two_rates_tried(model):
    spec = ServeSpec(hw="h100-sxm", model=model, prompt=32, output_tokens=8, slo_ttft=0.002, max_seqs=1, check=0)
    alone = memsim.serve("h100-sxm", model, rate=1, count=3, prompt=32, output_tokens=8, check=0).summary.ttft_s_p50
    result = find(spec, CapacitySpec(duration=0.2, warmup=0.02, start=256, most=1 << 16, bisect=2))
    assert alone < 0.002  # alone, a request meets the SLO ...
    assert result.capacity.bound == FOUND  # ... and enough of them at once do not
    met = [p for p in result.capacity.points if p.met]
    assert max(p.rate for p in met) == result.capacity.rate and result.at is not None


def test_a_closed_loop_ramps_its_clients_up_and_draws_their_think_times(model):
    kw = dict(users=4, count=24, prompt=32, output_tokens=8, think=0.05, check=0)
    lockstep = memsim.serve("h100-sxm", model, **kw).requests
    assert (lockstep.arrival_s.iloc[:4] == 0).all()  # every client at once: prompts in a wave
    ramped = memsim.serve("h100-sxm", model, ramp=1.0, think_dist="exponential", seed=4, **kw)
    first = sorted(ramped.requests.arrival_s)[:4]
    assert len(set(first)) == 4 and all(0 <= t < 1.0 for t in first)  # spread over the ramp
    again = memsim.serve("h100-sxm", model, ramp=1.0, think_dist="exponential", seed=4, **kw)
    assert again.requests.arrival_s.tolist() == ramped.requests.arrival_s.tolist()  # from the seed
    gaps = ramped.requests.sort_values("arrival_s")
    assert gaps.arrival_s.diff().dropna().std() > 0  # drawn think times, not one fixed pause
    spec = ServeSpec(hw="h100-sxm", model=model, ramp=1.0, think_dist="exponential", seed=4, **kw)
    assert "think exponential 0.05 s, starts over 1 s" in "\n".join(header(spec, ramped.summary))


@settings(max_examples=200, deadline=None)
@given(capacity=st.floats(min_value=1e-3, max_value=5e3), start=st.floats(min_value=0.01, max_value=1000),
       bisect=st.integers(min_value=0, max_value=8))
def test_the_search_brackets_any_threshold_or_says_it_is_censored(capacity, start, bisect):
    """For a deployment that meets the SLOs exactly below ``capacity``, the answer meets them, the rate it
    failed does not, and the bracket halves with each bisection; outside the range tried, it says so."""
    least, most = 0.01, 1024.0

    def meets(rate: float) -> Point:
        return Point(rate=rate, offered=rate, served=rate, requests=1, ttft_s=0, tpot_s=0, met=rate <= capacity, why="")

    found = search(meets, start=start, least=least, most=most, bisect=bisect)
    if capacity >= most:
        assert found.bound == AT_LEAST and found.rate == most
    elif capacity < least:
        assert found.bound == BELOW and found.rate == 0 and found.failed == least
    else:
        assert found.bound == FOUND and found.rate <= capacity < found.failed
        first = [p.rate for p in found.points][:len(found.points) - bisect]  # doubling or halving, then bisections
        met, failed = max(r for r in first if r <= capacity), min(r for r in first if r > capacity)
        assert failed <= 2 * met  # neighbours of the doubling (or clamped to the range's end)
        assert found.failed - found.rate == pytest.approx((failed - met) / 2 ** bisect, rel=1e-9)
    assert len(found.points) <= math.ceil(max(math.log2(most / start), math.log2(start / least), 0)) + 1 + bisect
