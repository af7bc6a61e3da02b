"""Requests for a serving run: a CSV trace checked row by row, and synthetic arrivals from a seed."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsim.core.errors import ConfigError
from memsim.workload.requests import MAX_TOKENS, read_requests, synthetic


def test_a_trace_reads_back_with_its_prefixes(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,100,5,sys,64\n0.5,80,3,,\n")
    a, b = read_requests(path)
    assert (a.arrival_s, a.prompt, a.output, a.prefix_id, a.prefix) == (0.0, 100, 5, "sys", 64)
    assert (b.prefix_id, b.prefix) == ("", 0)


@pytest.mark.parametrize(("text", "field", "needle"), [
    ("arrival_s,prompt_tokens\n0,1\n", "header", "missing column 'output_tokens'"),
    ("arrival_s,prompt_tokens,output_tokens,colour\n0,1,1,red\n", "header", "unknown column 'colour'"),
    ("arrival_s,prompt_tokens,output_tokens\n0,1,1\nsoon,1,1\n", "row 3", "arrival_s: 'soon' is not a number"),
    ("arrival_s,prompt_tokens,output_tokens\n0,0,1\n", "row 2", "prompt_tokens 0 must be a whole number from 1 to"),
    ("arrival_s,prompt_tokens,output_tokens\n1,5,1\n0.5,5,1\n", "row 3", "rows go in arrival order"),
    ("arrival_s,prompt_tokens,output_tokens\nnan,5,1\n", "row 2", "must be a time from 0 to memsim's horizon"),
    ("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,5,1,a,9\n", "row 2", "prefix_tokens 9"),
    ("arrival_s,prompt_tokens,output_tokens\n", "rows", "holds no requests"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,1,7\n", "row 2", "1 more cells than the header's 3 columns"),
    ("arrival_s,prompt_tokens,output_tokens,prompt_tokens\n0,5,1,6\n", "header", "column 'prompt_tokens' is repeated"),
    ("arrival_s,prompt_tokens,output_tokens,prefix_id\n0,5,1," + "a" * 2**20 + "\n", "row 2", "not a CSV the reader"),
    ("arrival_s,prompt_tokens,output_tokens\n1e300,5,1\n", "row 2", "must be a time from 0 to memsim's horizon"),
])
def test_a_bad_trace_is_one_line_naming_the_file_and_row(tmp_path, text, field, needle):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_requests(path)
    assert info.value.file == str(path) and info.value.field == field and needle in info.value.message
    assert "\n" not in str(info.value)


def test_synthetic_arrivals_follow_their_rate_and_repeat_with_their_seed():
    reqs = synthetic(4000, rate=10.0, seed=7)
    gaps = np.diff([r.arrival_s for r in reqs])
    assert reqs[0].arrival_s == 0 and np.mean(gaps) == pytest.approx(0.1, rel=0.05)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, rel=0.1)  # exponential gaps: CV 1
    assert synthetic(50, rate=10.0, seed=7) == reqs[:50] and synthetic(50, rate=10.0, seed=8) != reqs[:50]
    bursty = np.diff([r.arrival_s for r in synthetic(4000, rate=10.0, arrival="gamma", burstiness=3.0, seed=7)])
    assert np.std(bursty) / np.mean(bursty) == pytest.approx(3.0, rel=0.15)
    lengths = [r.prompt for r in synthetic(4000, rate=1.0, prompt=500, lengths="lognormal", spread=0.5, seed=1)]
    assert np.median(lengths) == pytest.approx(500, rel=0.05)
    shared = synthetic(3, rate=1.0, prompt=1200, prefix=1000)
    assert all(r.prompt == 1200 and r.prefix == 1000 and r.prefix_id for r in shared)
    drawn = synthetic(50, rate=1.0, prompt=1200, prefix=1000, lengths="uniform", spread=0.5, seed=3)
    assert min(r.prompt for r in drawn) == 1000  # a drawn prompt shorter than the prefix is the prefix


def test_bad_synthetic_settings_are_refused():
    for kwargs, field in (({"rate": 0}, "rate"), ({"rate": 1, "arrival": "storm"}, "arrival"),
                          ({"rate": 1, "lengths": "zipf"}, "lengths")):
        with pytest.raises(ConfigError) as info:
            synthetic(10, **kwargs)
        assert info.value.field == field


@given(prompt=st.integers(-3, 3) | st.sampled_from([MAX_TOKENS, MAX_TOKENS + 1, 2**40]),
       output=st.integers(-2, 2) | st.just(MAX_TOKENS + 1), prefix=st.integers(-2, 6))
@settings(max_examples=80, deadline=None)
def test_a_drawn_request_and_a_trace_row_take_and_refuse_the_same_values(tmp_path_factory, prompt, output, prefix):
    """One rule on both paths: a trace row and the drawn requests accept the same prompt, output and
    prefix, and refuse the others with the same words; nothing is clamped."""
    path = tmp_path_factory.mktemp("rows") / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"
                    f"0,{prompt},{output},{'p' if prefix else ''},{prefix}\n")
    outcomes = []
    for make in (lambda: read_requests(path)[0], lambda: synthetic(1, 1.0, prompt=prompt, output=output, prefix=prefix)[0]):
        try:
            r = make()
            outcomes.append(("ok", r.prompt, r.output, r.prefix))
        except ConfigError as exc:
            outcomes.append(("refused", exc.message.split(" must ")[0]))
    assert outcomes[0] == outcomes[1], outcomes


@pytest.mark.parametrize(("kw", "field"), [({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"),
                                           ({"arrival": "gamma", "burstiness": 1e200}, "burstiness"),
                                           ({"arrival": "gamma", "burstiness": 1e-9}, "burstiness"),
                                           ({"rate": 1e-300, "n": 3}, "rate"), ({"spread": 7.0}, "spread")])
def test_drawn_requests_refuse_what_they_cannot_draw_in_one_line(kw, field):
    args = {"n": 2, "rate": 1.0, **kw}
    with pytest.raises(ConfigError) as info:
        synthetic(args.pop("n"), args.pop("rate"), **args)
    assert info.value.field == field and "\n" not in info.value.one_line()


def test_a_duration_draws_every_request_that_arrives_in_it():
    reqs = synthetic(1, 50.0, duration=20.0, seed=3)
    assert all(r.arrival_s < 20.0 for r in reqs) and reqs[-1].arrival_s > 19.0
    assert 800 < len(reqs) < 1200  # Poisson: 1000 expected
    bursty = synthetic(1, 50.0, duration=20.0, arrival="gamma", burstiness=30.0, seed=3)  # batches drawn till covered
    assert all(r.arrival_s < 20.0 for r in bursty)
    assert synthetic(1, 5.0, duration=4.0, seed=1) == synthetic(1, 5.0, duration=4.0, seed=1)
    with pytest.raises(ConfigError, match="more than memsim serves in one run"):
        synthetic(1, 1e6, duration=1e3)
    with pytest.raises(ConfigError, match="duration"):
        synthetic(1, 1.0, duration=-1.0)
