"""memsim serve: requests on a deployment, each step timed by memsim's engine."""
from __future__ import annotations

import json

import pytest

import memsim
from memsim import simulate
from memsim.cli import main as cli
from memsim.engine.serving_state import Batch
from memsim.serving import report as serving_report
from memsim.serving.model import StepModel
from memsim.serving.serve import host_work
from memsim.serving.spec import ServeSpec

HW, MODEL = "h100-sxm", "llama-3.1-8b"


def test_under_light_load_ttft_is_the_prefill_step_and_tpot_the_decode_step():
    r = memsim.serve(HW, MODEL, rate=0.05, count=4, prompt=512, output_tokens=32, seed=1, stack="ideal")
    prefill = simulate(HW, MODEL, phase="prefill", batch=1, prompt=512, sensitivity=0, stack="ideal").summary
    decode = simulate(HW, MODEL, phase="decode", batch=1, context=512 + 16, sensitivity=0, stack="ideal").summary
    assert (r.requests.queue_s == 0).all()
    for ttft, tpot in zip(r.requests.ttft_s, r.requests.tpot_s):
        assert ttft == pytest.approx(prefill.step_time_s, rel=0.02)
        assert tpot == pytest.approx(decode.step_time_s, rel=0.02)


def test_a_stacks_front_end_and_step_work_add_to_every_request_as_declared():
    """vLLM V0's profile: a request passes the front end before it is scheduled, and every step pays its
    host work in series, its output work hidden behind the next step (asynchronous output processing)."""

    kw = dict(rate=0.05, count=4, prompt=512, output_tokens=32, seed=1)
    ideal, v0 = memsim.serve(HW, MODEL, stack="ideal", **kw), memsim.serve(HW, MODEL, stack="vllm-v0", **kw)
    host = host_work(StepModel.of(ServeSpec(stack="vllm-v0")).stack, 1)
    assert host.frontend_s > 0 and host.overlap == "output" and v0.summary.deployment.stack == "vllm-v0"
    # one decode a step: the host's work before it, then the longer of the device's and the last step's output
    one = host.fixed_s + host.per_sequence_s + host.per_token_s
    assert v0.requests.tpot_s.median() == pytest.approx(ideal.requests.tpot_s.median() + one, rel=0.02)
    assert (v0.requests.ttft_s - ideal.requests.ttft_s).min() >= host.frontend_s + one
    # the summary says what the host added: every decode step's work, and nothing on the ideal stack
    decodes = v0.steps[v0.steps.prefills == 0]
    assert decodes.host_s.to_numpy() == pytest.approx(one, rel=1e-6)
    assert v0.summary.host.busy_s == pytest.approx(v0.steps.host_s.sum())
    assert 0 < v0.summary.host.busy_fraction < 1 and ideal.summary.host.busy_s == 0
    assert "stack            vllm-v0: its host added" in serving_report.summary_table(v0.summary)


def test_littles_law_holds_for_the_simulated_queue():
    s = memsim.serve(HW, MODEL, rate=30, count=400, prompt=256, output_tokens=64, lengths="uniform", seed=2).summary
    assert s.mean_in_system == pytest.approx(s.requests_per_s * s.e2e_s_mean, rel=0.02)
    assert s.mean_in_system > 2  # a real queue, not one request at a time


@pytest.mark.slow
@pytest.mark.long
def test_throughput_saturates_and_more_hbm_moves_the_saturation_up():
    def run(rate, hbm):
        return memsim.serve(HW, MODEL, rate=rate, count=300, prompt=1024, output_tokens=256, seed=3,
                            set={"hbm.capacity": hbm}, stack="ideal").summary  # the whole HBM for the cache

    small = [run(rate, "24GB") for rate in (4, 16, 32)]  # 24 GB: 16 GB of weights leave 3,785 KV blocks
    big = run(32, "80GB")
    assert small[1].output_tokens_per_s > 2 * small[0].output_tokens_per_s  # rises with the rate ...
    assert small[2].output_tokens_per_s < 1.15 * small[1].output_tokens_per_s  # ... then flattens
    assert small[2].queue_s_p90 > max(10 * small[1].queue_s_p90, 1.0)  # while the queue grows
    assert small[2].kv.peak_blocks > 0.9 * small[2].kv.blocks  # the KV cache is what saturates
    assert small[2].limit.by == "KV cache capacity (hbm)" and small[0].limit.kv_full_fraction == 0
    assert big.output_tokens_per_s > 1.3 * small[2].output_tokens_per_s


def test_prefix_caching_lowers_ttft_and_kv_blocks_for_a_shared_prefix():
    kw = {"rate": 4, "count": 40, "prompt": 1200, "output_tokens": 32, "prefix": 1000, "seed": 4}
    on, off = memsim.serve(HW, MODEL, prefix_caching=True, **kw).summary, memsim.serve(HW, MODEL, **kw).summary
    assert on.ttft_s_mean < 0.7 * off.ttft_s_mean
    assert on.kv.peak_blocks < off.kv.peak_blocks


def test_the_same_seed_gives_byte_identical_outputs(tmp_path):
    for name in ("a", "b"):
        memsim.serve(HW, MODEL, rate=10, count=60, lengths="lognormal", seed=5).write(tmp_path / name)
    for file in ("requests.csv", "steps.csv", "serve.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()
    summary = json.loads((tmp_path / "a" / "serve.json").read_text())
    assert summary["surrogate"]["max_error"] <= 0.02  # interpolated step times against full simulation


def test_the_command_line_serves_and_refuses_a_bad_trace_in_one_line(monkeypatch, capsys, tmp_path):
    def memsim_cli(*args):
        monkeypatch.setattr("sys.argv", ["memsim", "serve", *args])
        try:
            cli.entry()
        except SystemExit as exc:
            return exc.code, capsys.readouterr()
        return 0, capsys.readouterr()

    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,128,8\n0.01,64,4\n")
    code, io = memsim_cli("--requests", str(trace), "--out", str(tmp_path / "o"))
    assert code == 0 and "served 2 requests" in io.out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["requests.csv", "serve.json", "steps.csv"]
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,128,8\n0.01,lots,4\n")
    code, io = memsim_cli("--requests", str(trace), "--out", str(tmp_path / "p"))
    assert code == 2 and io.err.strip() == f"memsim: error: {trace}: row 3: prompt_tokens: 'lots' is not a whole number"
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(("args", "expect"), [
    (("--count", "0"), "--count: must be at least 1, got 0"),
    (("--block-tokens", "100000"), "--block-tokens: must be at most 4,096"),
    (("--slo-tpot", "0"), "--slo-tpot: must be at least 1e-09"),
    (("--rate", "-3"), "--rate: must be at least 1e-09"),
    (("--count", "3", "--prompt", "1000000"), "requests[0]: request 0 needs 62508 KV blocks"),
])
def test_bad_serving_options_are_one_line_naming_the_flag(monkeypatch, capsys, tmp_path, args, expect):
    monkeypatch.setattr("sys.argv", ["memsim", "serve", *args, "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exit_:
        cli.entry()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and expect in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_chunked_prefill_keeps_p99_tpot_under_a_full_budget_step_where_prefill_first_exceeds_it():

    kw = {"rate": 2.5, "count": 40, "prompt": 8000, "output_tokens": 32, "seed": 7}
    first = memsim.serve(HW, MODEL, **kw)
    chunked = memsim.serve(HW, MODEL, scheduler="chunked", max_tokens=512, **kw)
    decodes = int(chunked.steps.decodes.max())
    assert decodes <= 8 and chunked.steps.tokens.max() <= 512
    # The bound: the longest step chunked prefill can take here, the whole budget with 8 decodes at their
    # longest context beside the last chunk of a prompt.
    bound = StepModel.of(ServeSpec()).mixed(((8, 1, 8000 + 32), (1, 512 - 8, 8000 - 504))).seconds
    assert chunked.summary.tpot_s_p99 <= bound < first.summary.tpot_s_p99
    assert chunked.summary.surrogate.max_error <= 0.02


def test_disaggregated_serving_sends_each_kv_cache_over_the_link():
    r = memsim.serve(HW, MODEL, rate=2, count=10, prompt=1000, output_tokens=16, prefill_instances=1, decode_instances=1, seed=8)
    kv = r.summary.kv
    link = memsim.simulate(HW, MODEL, sensitivity=0).chip.interconnect
    expected = link.latency_ps * 1e-12 + 1001 * kv.bytes_per_token / link.achievable(link.count)
    assert r.requests.handoff_s.to_numpy() == pytest.approx(expected)
    assert set(r.requests.instance) == {1}  # every sequence decoded on the decode instance
    assert (r.steps[r.steps.instance == 0].decodes == 0).all()
    assert r.summary.handoff.energy_j > 0 and r.summary.deployment.layout.startswith("1 prefill + 1 decode")
    s = r.summary  # the handoff's energy is in every energy figure, per token and per second as well
    assert s.energy_j == pytest.approx(float(r.steps.energy_j.sum()) + s.handoff.energy_j)
    assert s.energy_per_token_j == pytest.approx(s.energy_j / int(r.requests.output_tokens.sum()))
    assert s.avg_power_w == pytest.approx(s.energy_j / s.span_s)


def test_swapping_to_host_memory_frees_hbm_without_recomputing():
    kw = {"rate": 50, "count": 60, "prompt": 512, "output_tokens": 512, "seed": 9, "set": {"hbm.capacity": "17GB"},
          "stack": "ideal"}  # the whole HBM for the KV cache: a stack's share of 17 GB would not hold the weights
    swap = memsim.serve(HW, MODEL, preemption="swap", **kw).summary
    assert swap.preemptions > 0 and swap.swapped_blocks > 0 and swap.kv.host == "ddr"
    assert swap.requests == 60


def test_a_closed_loop_of_users_holds_that_many_requests_in_flight():
    s = memsim.serve(HW, MODEL, users=4, count=40, prompt=256, output_tokens=32).summary
    assert 3.5 < s.mean_in_system <= 4.0  # four clients, each always waiting on its request
    assert s.mean_in_system == pytest.approx(s.requests_per_s * s.e2e_s_mean, rel=0.02)


def test_replicas_serve_more_at_the_same_latency():
    kw = {"rate": 40, "count": 200, "prompt": 1024, "output_tokens": 128, "seed": 10}
    one, two = memsim.serve(HW, MODEL, **kw).summary, memsim.serve(HW, MODEL, replicas=2, **kw).summary
    assert two.ttft_s_p90 < one.ttft_s_p90
    assert two.deployment.replicas == 2


def test_pipeline_stages_run_as_virtual_engines_sharing_the_stages_kv_cache():
    kw = {"rate": 40, "count": 120, "prompt": 1024, "output_tokens": 128, "seed": 12, "set": {"hbm.capacity": "24GB"},
          "stack": "ideal"}
    one, two = memsim.serve(HW, MODEL, **kw).summary, memsim.serve(HW, MODEL, pp=2, **kw).summary
    block = 16 * one.kv.bytes_per_token
    weights = 24e9 - one.kv.levels["hbm"]  # what the weights take of one chip's HBM
    assert two.kv.blocks == pytest.approx((2 * 24e9 - weights) / 2 / block, abs=2)  # each engine's half
    assert two.deployment.layout == "1 instance of 2 chips (tp 1 x pp 2)"
    assert two.output_tokens_per_s > one.output_tokens_per_s  # two batches in flight, twice the cache


@pytest.mark.parametrize("hw, tp, dtype", [("h100-sxm", 2, "fp8"), ("sn40l", 1, "bf16")])
def test_a_plain_step_built_as_a_mixed_step_is_the_step_memsim_run_simulates(hw, tp, dtype):

    model = StepModel.of(ServeSpec(hw=hw, tp=tp, weight_dtype=dtype, stack="ideal"))
    for phase, batch, length in (("decode", 32, 1500), ("prefill", 2, 700)):
        key = "context" if phase == "decode" else "prompt"
        want = simulate(hw, MODEL, phase=phase, batch=batch, tp=tp, weight_dtype=dtype, sensitivity=0,
                        stack="ideal", **{key: length}).summary
        got = model.plain(phase, batch, length)
        assert (got.seconds, got.joules, got.bound) == (want.step_time_s, want.energy_j.total,
                                                         want.roofline_bound)


def test_a_layer_pipelined_prefill_step_leaves_the_hosts_step_work_to_the_serving_loop():
    """On a wafer a serving prefill runs as memsim run's (its prompt streamed through the layers in chunks),
    but without the stack's work before and after it: the serving loop adds that once (it was added twice)."""
    model = StepModel.of(ServeSpec(hw="wse-3", model="llama-3.1-8b", stack="vllm-v0"))
    alone = simulate("wse-3", "llama-3.1-8b", phase="prefill", prompt=512, sensitivity=0, stack="vllm-v0").summary
    before = host_work(model.stack, 1).before(Batch(prefills=((0, 512, 0),)))
    assert before > 0
    assert model.plain("prefill", 1, 512).seconds == pytest.approx(alone.step_time_s - before, rel=1e-6)


@pytest.mark.parametrize(("args", "flag"), [(("--prompt", "-5"), "--prompt"), (("--prompt", "0"), "--prompt"),
                                            (("--output-tokens", "0"), "--output-tokens"),
                                            (("--prefix", "600"), "--prefix"), (("--seed", "-1"), "--seed"),
                                            (("--arrival", "gamma", "--burstiness", "1e200"), "--burstiness")])
def test_the_command_line_refuses_what_a_trace_refuses_naming_the_flag(monkeypatch, capsys, args, flag):
    monkeypatch.setattr("sys.argv", ["memsim", "serve", "--count", "2", *args])
    with pytest.raises(SystemExit) as info:
        cli.entry()
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and f": {flag}: " in err, err


def test_serve_json_holds_the_declared_keys_in_the_declared_order(tmp_path):
    from dataclasses import fields

    from memsim.serving.summary import ServeSummary

    r = memsim.serve(HW, MODEL, count=3, output_tokens=4)
    declared = [f.name for f in fields(ServeSummary)]
    assert list(r.summary.as_dict()) == declared
    assert r.summary.kv.block_tokens == 16 and r.summary.slo.ttft_s == 1.0  # typed parts until it is written
    r.write(tmp_path / "s")
    assert list(json.loads((tmp_path / "s" / "serve.json").read_text())) == declared


def test_a_power_cap_no_clock_holds_is_said_once_for_a_serving_run(recwarn):
    """h100-sxm at 150 W: the steps run at the lowest clock and still draw more; the run warns once,
    naming the cap and the most any step stayed above it."""
    kw = dict(model="llama-3.2-1b", count=4, rate=10.0, prompt=256, output_tokens=8)
    memsim.serve("h100-sxm", set={"execution.power_cap": "150 W"}, **kw)
    lines = [str(w.message) for w in recwarn if "not held" in str(w.message)]
    assert len(lines) == 1 and "150 W" in lines[0] and "W above it" in lines[0]
    recwarn.clear()
    memsim.serve("h100-sxm", **kw)
    assert not [w for w in recwarn if "not held" in str(w.message)]
