"""Speculative decoding: K drafted tokens, one verify step of K+1, E tokens a step on average."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsim import CapacityError, ConfigError, RunSpec, simulate, simulate_graph, workload
from memsim.run.speculative import expected_tokens
from memsim.sweep import runner as sweeping
from memsim.sweep import store as sweep_store
from tests.cli.test_cli import run_cli
from tests.conftest import TINY_MODEL, keyword


@pytest.fixture()
def draft_path(tmp_path):
    """A draft for the tiny model: one layer, narrower, the same vocabulary."""
    path = tmp_path / "tiny-draft.json"
    path.write_text(json.dumps({**TINY_MODEL, "num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64}))
    return str(path)


def test_expected_tokens_per_step():
    assert expected_tokens(0.0, 4) == 1.0  # every draft rejected: the target's own token only
    assert expected_tokens(1 - 1e-12, 4) == pytest.approx(5, rel=1e-9)  # every draft accepted: K + 1
    assert expected_tokens(0.8, 4) == pytest.approx(1 + 0.8 + 0.8**2 + 0.8**3 + 0.8**4)
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)
    for bad in ((1.0, 4), (-0.1, 4), (0.5, 0)):
        with pytest.raises(ValueError):
            expected_tokens(*bad)


@given(st.floats(0, 0.999999), st.floats(0, 0.999999), st.integers(1, 64), st.integers(1, 64))
def test_expected_tokens_lie_between_1_and_k_plus_1_and_grow_with_a_and_k(a, b, k, j):
    e = expected_tokens(a, k)
    assert 1 <= e <= k + 1 + 1e-9
    lo, hi = sorted((a, b))
    assert expected_tokens(lo, k) <= expected_tokens(hi, k) * (1 + 1e-12)
    assert expected_tokens(a, min(k, j)) <= expected_tokens(a, max(k, j)) * (1 + 1e-12)


@pytest.mark.slow
def test_llama_70b_with_a_1b_draft_is_its_steps_combined_by_the_expected_tokens():
    """The acceptance case: Llama-3.1-70B on 4 H100s, K = 4, a = 0.8, Llama-3.2-1B drafting.
    The draft's 4 steps and the verify step are simulated on their own through the public API
    and combined by E = (1 - a^5) / (1 - a)."""
    target, draft = workload.model_config("llama-3.1-70b"), workload.model_config("llama-3.2-1b")
    assert draft.vocab == target.vocab == 128256
    context, k, a = 2048, 4, 0.8
    s = simulate("h100-sxm", "llama-3.1-70b", tp=4, context=context, draft="llama-3.2-1b", draft_k=k,
                 accept=a).summary
    drafts = [simulate("h100-sxm", "llama-3.2-1b", tp=4, context=c).summary.step_time_s
              for c in range(context, context + k)]
    verify = simulate_graph("h100-sxm", workload.build_step(target, workload.StepSpec.make(
        "decode", context=context, tokens=k + 1, tp=4))).summary.step_time_s
    e = (1 - a ** (k + 1)) / (1 - a)
    sp = s.speculative
    assert sp.tokens_per_step == pytest.approx(e, rel=1e-12)
    assert sp.verify_step_s == pytest.approx(verify, rel=1e-12)
    assert sp.draft_step_s == pytest.approx(sum(drafts) / k, rel=1e-12)
    assert sp.time_per_token_s == pytest.approx((sum(drafts) + verify) / e, rel=1e-12)
    assert s.step_time_s == pytest.approx(sum(drafts) + verify, rel=1e-12)
    assert sp.tokens_per_s_per_sequence == pytest.approx(e / (sum(drafts) + verify), rel=1e-12)
    # Faster per token than plain decoding here, and never faster than its own roofline.
    plain = simulate("h100-sxm", "llama-3.1-70b", tp=4, context=context).summary.step_time_s
    assert sp.time_per_token_s < plain < verify
    assert s.step_time_s >= s.roofline_s


def test_a_speculative_step_adds_the_drafts_and_the_verify_step(tiny_chip_path, tiny_model_path, draft_path):
    chip, model = str(tiny_chip_path), str(tiny_model_path)
    r = simulate(chip, model, context=16, batch=2, draft=draft_path, draft_k=3, accept=0.5)
    s = r.summary
    drafts = [simulate(chip, draft_path, context=c, batch=2).summary for c in (16, 17, 18)]
    verify = simulate_graph(chip, workload.build_step(workload.load_model(tiny_model_path), workload.StepSpec.make(
        "decode", batch=2, context=16, tokens=4))).summary
    for key in ("step_time_s", "roofline_s", "flops_total", "weight_bytes", "kv_cache_bytes"):
        assert getattr(s, key) == pytest.approx(getattr(verify, key) + sum(getattr(d, key) for d in drafts), rel=1e-9), key
    assert s.energy_j.total == pytest.approx(verify.energy_j.total + sum(d.energy_j.total
                                                                                     for d in drafts))
    assert s.weight_bytes_stored == verify.weight_bytes_stored + drafts[0].weight_bytes_stored
    assert s.energy_per_token_j == pytest.approx(s.energy_j.total / (2 * expected_tokens(0.5, 3)))
    assert s.workload.tokens == 4 and s.workload.context == 16
    # The timeline: the three draft steps one after another, then the verify step.
    t = r.timeline
    for i, _d in enumerate(drafts, start=1):
        rows = t[t.op.str.startswith(f"draft{i}/")]
        assert rows.start_s.min() >= sum(x.step_time_s for x in drafts[:i - 1]) - 1e-15
        assert rows.end_s.max() <= sum(x.step_time_s for x in drafts[:i]) + 1e-15
    target = t[~t.op.str.startswith("draft")]
    assert target.start_s.min() >= sum(d.step_time_s for d in drafts) - 1e-15
    assert t.end_s.max() == pytest.approx(s.step_time_s)
    assert set(r.ops.op.str.extract(r"^(draft\d)/")[0].dropna()) == {"draft1", "draft2", "draft3"}


def test_self_drafting_costs_a_share_of_the_targets_decode_step(tiny_chip_path, tiny_model_path):
    chip, model = str(tiny_chip_path), str(tiny_model_path)
    decode = simulate(chip, model, context=16).summary
    free = simulate(chip, model, context=16, draft="self", draft_k=4, accept=0.6, draft_cost=0).summary
    paid = simulate(chip, model, context=16, draft="self", draft_k=4, accept=0.6, draft_cost=0.25).summary
    verify = free.speculative.verify_step_s
    assert free.step_time_s == pytest.approx(verify)
    assert paid.step_time_s == pytest.approx(verify + 4 * 0.25 * decode.step_time_s)
    assert paid.speculative.draft_step_s == pytest.approx(0.25 * decode.step_time_s)
    assert paid.bytes_per_level["hbm"].read == pytest.approx(
        free.bytes_per_level["hbm"].read + decode.bytes_per_level["hbm"].read, abs=4)
    assert free.speculative.time_per_token_s == pytest.approx(verify / expected_tokens(0.6, 4))


@pytest.mark.slow
def test_a_speculative_generation_advances_the_context_by_the_expected_tokens(tiny_chip_path, tiny_model_path,
                                                                                  draft_path):
    chip, model = str(tiny_chip_path), str(tiny_model_path)
    opts = dict(draft=draft_path, draft_k=2, accept=0.7)
    g = simulate(chip, model, phase="generate", prompt=16, generate=12, samples=12, **opts).summary
    prefill = simulate(chip, model, phase="prefill", prompt=16).summary
    steps = [simulate(chip, model, context=c, **opts).summary.step_time_s for c in range(16, 28)]
    e = expected_tokens(0.7, 2)
    # Each of the 12 tokens costs 1/E of the speculative step at its context.
    assert g.total_s == pytest.approx(prefill.step_time_s + sum(steps) / e, rel=1e-9)
    assert g.tpot_s == pytest.approx(sum(steps) / e / 12, rel=1e-9)
    assert g.speculative.time_per_token_s == g.tpot_s
    assert g.speculative.step_s == pytest.approx(sum(steps) / 12, rel=1e-9)
    assert g.tokens_per_s == pytest.approx(13 / g.total_s)
    assert [d.step_time_s for d in g.decode_samples] == pytest.approx(steps)
    assert g.compute_busy_s + g.stall_total_s == pytest.approx(g.total_s)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"draft_k": 4}, "--draft-k"),
    ({"accept": 0.5}, "--accept"),
    ({"draft": "gpt2", "draft_k": 4}, "--accept"),
    ({"draft": "gpt2", "accept": 0.5}, "--draft-k"),
    ({"draft": "gpt2", "draft_k": 4, "accept": 1.0}, "--accept"),
    ({"draft": "gpt2", "draft_k": 4, "accept": -0.1}, "--accept"),
    ({"draft": "gpt2", "draft_k": 4, "accept": float("nan")}, "--accept"),
    ({"draft": "gpt2", "draft_k": 4, "accept": "high"}, "--accept"),
    ({"draft": "gpt2", "draft_k": 0, "accept": 0.5}, "--draft-k"),
    ({"draft": "gpt2", "draft_k": 4, "accept": 0.5, "phase": "prefill"}, "--draft"),
    ({"draft": "gpt2", "draft_k": 4, "accept": 0.5, "draft_cost": 0.1}, "--draft-cost"),
    ({"draft": "self", "draft_k": 4, "accept": 0.5}, "--draft-cost"),
    ({"draft": "self", "draft_k": 4, "accept": 0.5, "draft_cost": -1}, "--draft-cost"),
    ({"draft": "llama-3.2-1b", "draft_k": 4, "accept": 0.5}, "--draft"),  # 128256 tokens against gpt2's 50257
    ({"draft": "bert-base", "draft_k": 4, "accept": 0.5}, "--draft"),
    ({"draft": "no-such-model", "draft_k": 4, "accept": 0.5}, "--draft"),
])
def test_incoherent_speculative_options_name_their_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        simulate("h100-sxm", "gpt2", context=64, **kwargs)
    assert info.value.field == keyword(field)
    assert "\n" not in info.value.one_line()


def test_a_dense_draft_for_a_mixture_of_experts_spreads_no_experts(tiny_chip_path, tmp_path):
    moe, draft = tmp_path / "tiny-moe.json", tmp_path / "two-heads.json"
    moe.write_text(json.dumps({**TINY_MODEL, "model_type": "mixtral", "num_local_experts": 4,
                               "num_experts_per_tok": 2}))
    draft.write_text(json.dumps({**TINY_MODEL, "num_hidden_layers": 1, "num_attention_heads": 2}))
    s = simulate(str(tiny_chip_path), str(moe), context=16, tp=2, ep=True, draft=str(draft), draft_k=2,
                 accept=0.5).summary
    dense = [simulate(str(tiny_chip_path), str(draft), context=c, tp=2).summary.step_time_s for c in (16, 17)]
    assert s.speculative.draft_step_s == pytest.approx(sum(dense) / 2, rel=1e-9)
    with pytest.raises(ConfigError) as info:  # errors in the draft's steps say they are the draft's
        simulate(str(tiny_chip_path), str(moe), context=16, tp=2, pp=4, ep=True, draft=str(draft), draft_k=2,
                 accept=0.5)  # the target's 4 blocks fill 4 stages; the one-layer draft's 3 cannot
    assert info.value.field == "pp" and info.value.message.startswith("the draft ")


def test_a_trace_drafts_nothing(tmp_path):
    with pytest.raises(ConfigError) as info:
        RunSpec(trace=str(tmp_path / "t.json"), draft="gpt2", draft_k=2, accept=0.5)
    assert info.value.field == "draft"


def test_acceptance_is_swept_as_a_number(tiny_model_path):
    swept = sweeping.parse_sweeps(["accept=0.75", "draft-k=3"])
    spec = sweeping.point_spec({"model": str(tiny_model_path), "draft": "self", "draft_k": 2, "draft_cost": 0.1},
                               next(sweeping.points(swept)))
    assert (spec.accept, spec.draft_k) == (0.75, 3)
    assert sweeping.expand("0.5..0.9:+0.2") == ["0.5", "0.7", "0.9"]
    with pytest.raises(ConfigError):
        sweeping.point_spec({"model": str(tiny_model_path), "draft": "self", "draft_k": 2, "draft_cost": 0.1},
                            {"accept": "1"})
    # A point is keyed by the draft model file's content, as by the target's; "self" names no file.
    assert sweep_store.identity(spec)["draft_content"] is None
    drafted = RunSpec(model="gpt2", draft=str(tiny_model_path), draft_k=2, accept=0.5)
    before = sweep_store.run_key(drafted)
    tiny_model_path.write_text(json.dumps({**TINY_MODEL, "num_hidden_layers": 1}))
    assert sweep_store.run_key(drafted) != before


def test_both_models_must_fit_on_the_chip_together(tiny_chip_path, tmp_path):
    """Each of these models' 0.6 GB fits in the tiny chip's 1 GB alone; not both."""
    big = {**TINY_MODEL, "num_hidden_layers": 1, "hidden_size": 1024, "num_attention_heads": 8,
           "vocab_size": 150_000, "intermediate_size": 128}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    simulate(str(tiny_chip_path), str(path), context=16)
    with pytest.raises(CapacityError) as info:
        simulate(str(tiny_chip_path), str(path), context=16, draft=str(path), draft_k=2, accept=0.5)
    assert info.value.field == "draft" and "together" in info.value.message


@pytest.mark.parametrize(("hw", "family"), [("h100-sxm", "gpu"), ("wse-3", "wafer"), ("sn40l", "rdu"),
                                          ("xeon-gold-6242", "cpu")])
def test_the_draft_runs_on_every_family(hw, family):
    """GPT-2 drafting for GPT-2 Medium (one vocabulary) on a chip of each family."""
    s = simulate(hw, "gpt2-medium", context=64, draft="gpt2", draft_k=2, accept=0.5).summary
    sp = s.speculative
    assert s.family == family and sp.tokens_per_step == 1.75
    assert s.step_time_s == pytest.approx(2 * sp.draft_step_s + sp.verify_step_s)
    assert sp.time_per_token_s == pytest.approx(s.step_time_s / 1.75)
    assert s.step_time_s >= s.roofline_s


def test_the_cli_prints_the_speculative_step(monkeypatch, capsys, tmp_path, tiny_chip_path, tiny_model_path,
                                             draft_path):
    out = tmp_path / "out"
    code, stdout, err = run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--model",
                                str(tiny_model_path), "--context", "16", "--draft", draft_path, "--draft-k", "3",
                                "--accept", "0.5", "--out", str(out))
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    sp = s["speculative"]
    assert f"K=3, accept 0.5: 1.875 tokens/step, {sp['time_per_token_s'] * 1e3:.4f} ms/token" in stdout
    assert f"draft 3 x {sp['draft_step_s'] * 1e3:.4f} ms + verify {sp['verify_step_s'] * 1e3:.4f} ms" in stdout
    assert "tokens=4 context=16" in stdout
    code, stdout, err = run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--model",
                                str(tiny_model_path), "--draft", draft_path, "--draft-k", "3", "--accept", "1")
    assert code == 2 and err.strip() == "memsim: error: --accept: must be below 1, got 1.0"
    code, _, err = run_cli(monkeypatch, capsys, "run", "--hw", str(tiny_chip_path), "--model",
                           str(tiny_model_path), "--draft-cost", "0.1")
    assert code == 2 and err.count("\n") == 1 and "--draft-cost" in err


def test_draft_steps_beyond_samples_are_interpolated(tiny_chip_path, tiny_model_path, draft_path):
    chip, model = str(tiny_chip_path), str(tiny_model_path)
    opts = dict(context=16, draft=draft_path, draft_k=12, accept=0.9)
    every = simulate(chip, model, samples=12, **opts)
    sampled = simulate(chip, model, samples=3, **opts)
    assert sampled.summary.step_time_s == pytest.approx(every.summary.step_time_s, rel=0.01)
    drafted = lambda r: set(r.timeline.op.str.extract(r"^(draft\d+)/")[0].dropna())
    assert len(drafted(every)) == 12 and drafted(sampled) == {"draft1", "draft7", "draft12"}
