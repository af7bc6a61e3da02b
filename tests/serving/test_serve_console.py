"""What memsim serve says: a header of what was served on what, steps in words, and a warning when
preemptions thrash."""
from __future__ import annotations

import pytest

from memsim import serve
from memsim.core.errors import MemsimWarning
from memsim.serving.report import step_words, summary_table
from memsim.serving.spec import ServeSpec


def test_the_console_opens_with_the_deployment_the_requests_and_the_slos(tiny_chip_path, tiny_model_path):
    kw = dict(count=6, rate=20.0, prompt=16, output_tokens=4, lengths="lognormal", prefix=4, slo_ttft=0.5)
    r = serve(str(tiny_chip_path), str(tiny_model_path), **kw)
    spec = ServeSpec.make({"hw": str(tiny_chip_path), "model": str(tiny_model_path), **kw})
    lines = summary_table(r.summary, spec).splitlines()
    assert lines[0].startswith(f"{tiny_chip_path}  {tiny_model_path}  serve  1 instance of 1 chip")
    assert "scheduler" in lines[0] and "stack ideal" in lines[0]
    assert lines[1].split() [:4] == ["requests", "6", "drawn:", "poisson"] and "4-token shared prefix" in lines[1]
    assert lines[2].split()[:5] == ["SLOs", "TTFT", "0.5", "s,", "TPOT"]
    assert lines[3].startswith("served 6 requests")
    assert summary_table(r.summary).splitlines()[0] == lines[3]  # from Python, no header


@pytest.mark.parametrize("shape, words", [
    ("decode 2 524", "a decode of 2 sequences at context 524"),
    ("prefill 1 512", "a prefill of 1 sequence of 512 tokens"),
    ("mixed 530 2 1048 12 1", "a mixed step of 2 decodes and 1 prefill chunk (530 tokens)"),
    ("segments x", "segments x"),
])
def test_a_steps_shape_reads_as_words(shape, words):
    assert step_words(shape) == words


@pytest.mark.slow
def test_preemptions_past_a_share_of_the_steps_warn_with_what_would_avoid_them():
    """64 long generations admitted at once into 778 KV blocks: sequences are preempted and recomputed
    over and over."""
    with pytest.warns(MemsimWarning, match=r"78 preemptions in 1,268 steps \(6%\).*--max-seqs below 64.*fp8"):
        s = serve("h100-sxm", "llama-3.2-1b", count=64, rate=1e6, prompt=128, output_tokens=512, max_seqs=64,
                  scheduler="prefill_first", set={"hbm.capacity": "3.2GB"}).summary
    assert s.preemptions == 78
