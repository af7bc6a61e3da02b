"""The serving loop on its own, with step times given: batching, KV blocks, preemption, prefix caching."""
from __future__ import annotations

import pytest

from memsim.core.errors import ConfigError
from memsim.engine.serving import Instance, Limits, serve, serve_instances
from memsim.engine.serving_state import HostWork
from memsim.workload.requests import Request


def step_time(batch):  # a prefill costs its tokens, a decode step its batch: simple and exact
    return 1e-4 * sum(t for _, t, _ in batch.prefills) + 1e-3 + 1e-5 * len(batch.decodes)


def reqs(*specs):
    return [Request(id=i, arrival_s=a, prompt=p, output=o, prefix_id=pid, prefix=pre)
            for i, (a, p, o, pid, pre) in enumerate((*s, "", 0) if len(s) == 3 else s for s in specs)]


def test_one_request_alone_takes_its_prefill_then_one_decode_a_token():
    seqs, steps, _ = serve(reqs((0.0, 100, 5)), "prefill_first", Limits(kv_blocks=100), step_time)
    s = seqs[0]
    assert s.first_token_s == pytest.approx(step_time_of(prefill=100))
    assert s.end_s - s.first_token_s == pytest.approx(4 * step_time_of(decodes=1))
    assert [r["prefills"] + r["decodes"] for r in steps] == [1, 1, 1, 1, 1] and s.generated == 5


def step_time_of(prefill=0, decodes=0):
    return 1e-4 * prefill + 1e-3 + 1e-5 * decodes


def test_prefills_go_first_and_decodes_batch_together():
    seqs, steps, _ = serve(reqs((0.0, 10, 3), (0.0, 10, 3)), "prefill_first", Limits(kv_blocks=100), step_time)
    assert steps[0]["prefills"] == 2 and steps[1]["decodes"] == 2
    assert all(s.end_s == seqs[0].end_s for s in seqs)


def test_a_full_kv_cache_preempts_the_newest_and_every_request_still_finishes():
    # 4 blocks of 16 tokens: two sequences of 20-token prompts fit, but not both growing to 60 tokens
    specs = [(0.0, 20, 40), (0.0, 20, 40)]
    seqs, steps, _ = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=4, block_tokens=16), step_time)
    assert sum(s.preemptions for s in seqs) >= 1
    assert all(s.generated == s.output and s.end_s is not None for s in seqs)
    assert max(r["kv_blocks_used"] for r in steps) <= 4


def test_a_request_larger_than_the_cache_is_refused_naming_it():
    with pytest.raises(ConfigError, match="request 0 needs 7 KV blocks") as info:
        serve(reqs((0.0, 100, 10)), "prefill_first", Limits(kv_blocks=5, block_tokens=16), step_time)
    assert info.value.field == "requests[0]"


def test_prefix_caching_computes_and_stores_a_shared_prefix_once():
    specs = [(i * 1.0, 1100, 2, "sys", 1000) for i in range(4)]
    on, _, _ = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=1000, prefix_caching=True), step_time)
    off, _, _ = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=1000), step_time)
    assert on[0].first_token_s - on[0].arrival_s == pytest.approx(off[0].first_token_s - off[0].arrival_s)
    for a, b in zip(on[1:], off[1:]):  # later requests compute only what follows the cached prefix
        assert a.first_token_s - a.arrival_s < 0.2 * (b.first_token_s - b.arrival_s)


def test_static_batching_admits_nothing_until_its_batch_is_done():
    seqs, _, _ = serve(reqs((0.0, 10, 10), (0.0005, 10, 2)), "static", Limits(kv_blocks=100), step_time)
    assert seqs[1].scheduled_s >= seqs[0].end_s  # arrived during the first batch: waits for all of it


def test_the_time_in_system_integral_is_littles_law():
    specs = [(i * 0.003, 50, 20) for i in range(200)]
    seqs, _, area = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=2000), step_time)
    span = max(s.end_s for s in seqs) - min(s.arrival_s for s in seqs)
    assert area / span == pytest.approx(len(seqs) / span * sum(s.end_s - s.arrival_s for s in seqs) / len(seqs))


def test_chunked_prefill_splits_a_long_prompt_and_keeps_decoding_every_step():
    specs = [(0.0, 40, 30), (0.01, 1000, 2)]  # a long prompt arrives while the first request decodes
    limits = Limits(kv_blocks=1000, max_tokens=128)
    seqs, steps, _ = serve(reqs(*specs), "chunked", limits, step_time)
    assert max(r["tokens"] for r in steps) <= 128
    long_steps = [r for r in steps if r["prefills"] and r["start_s"] >= 0.01 and r["start_s"] < seqs[1].first_token_s]
    assert len(long_steps) >= 1000 // 128  # its prompt in chunks ...
    assert all(r["decodes"] == 1 for r in long_steps if r["start_s"] < seqs[0].end_s)  # ... beside the decodes
    first, _, _ = serve(reqs(*specs), "prefill_first", limits, step_time)
    # the decode is not stalled by the whole prefill
    assert seqs[0].end_s - seqs[0].first_token_s < first[0].end_s - first[0].first_token_s


def test_swap_preemption_moves_blocks_to_the_host_and_back_without_recomputing():
    specs = [(0.0, 20, 40), (0.0, 20, 40)]
    computed = []

    def timed(batch):
        computed.append(sum(t for _, t, _ in batch.prefills))
        return step_time(batch)

    limits = Limits(kv_blocks=4, block_tokens=16, preemption="swap", swap_blocks=8)
    seqs, steps, _ = serve(reqs(*specs), "prefill_first", limits, timed)
    assert sum(s.preemptions for s in seqs) >= 1 and sum(r["swapped_blocks"] for r in steps) >= 2
    assert sum(computed) == 40  # each prompt prefilled once: nothing recomputed
    assert all(s.generated == s.output for s in seqs)


def test_a_closed_loop_keeps_at_most_its_users_in_the_system():
    specs = [(0.0, 50, 10)] * 9
    seqs, _, _ = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=1000), step_time, users=3, think_s=0.5)
    for k in range(3, 9):  # a client sends its next request its think time after the last one ended
        assert seqs[k].arrival_s == pytest.approx(seqs[k - 3].end_s + 0.5)
    events = sorted([(s.arrival_s, 1) for s in seqs] + [(s.end_s, -1) for s in seqs], key=lambda e: (e[0], e[1]))
    level = peak = 0
    for _, change in events:
        level += change
        peak = max(peak, level)
    assert peak == 3


def test_replicas_share_the_load_and_disaggregation_sends_prefilled_sequences_to_decode():

    limits = Limits(kv_blocks=1000)
    both = [Instance(scheduler="prefill_first", limits=limits, step_time=step_time)] * 2
    seqs, steps, _ = serve_instances(reqs((0.0, 100, 5), (0.0, 100, 5)), both)
    assert {s.instance for s in seqs} == {0, 1}
    assert seqs[0].first_token_s == seqs[1].first_token_s == pytest.approx(step_time_of(prefill=100))
    split = [Instance(scheduler="prefill_first", limits=limits, step_time=step_time, role="prefill"),
             Instance(scheduler="decode_only", limits=limits, step_time=step_time, role="decode")]
    seqs, steps, _ = serve_instances(reqs((0.0, 100, 5), (0.5, 100, 5)), split, handoff=lambda s: 0.01)
    assert all(r["decodes"] == 0 for r in steps if r["instance"] == 0)
    assert all(r["prefills"] == 0 for r in steps if r["instance"] == 1)
    s = seqs[0]
    assert s.handoff_s == pytest.approx(0.01) and s.instance == 1
    assert s.end_s - s.first_token_s == pytest.approx(0.01 + 4 * step_time_of(decodes=1))


def _one(host, *specs, limits=None):
    inst = Instance(scheduler="prefill_first", limits=limits or Limits(kv_blocks=100), step_time=step_time, host=host)
    return serve_instances(reqs(*specs), [inst])


def test_multi_step_pays_the_hosts_step_work_once_a_round_and_admits_only_between_rounds():
    """vLLM V0's multi-step scheduling: a round of 4 decode steps pays the host's work before its first and
    after its last; a request arriving mid-round waits for the round's end before its prefill."""

    work = dict(fixed_s=2e-3, output_fixed_s=1e-3)
    single, _, _ = _one(HostWork(**work), (0.0, 10, 9))
    multi, steps, _ = _one(HostWork(**work, multi_step=4), (0.0, 10, 9))
    # 8 decode steps after the prefill: single-step pays 3 ms each; 4-step rounds pay it twice
    decode = step_time_of(decodes=1)
    assert single[0].end_s - single[0].first_token_s == pytest.approx(8 * (decode + 3e-3))
    assert multi[0].end_s - multi[0].first_token_s == pytest.approx(8 * decode + 2 * 3e-3)
    # a second request arriving 1 ms into the first's first round joins only when that round ends
    late, steps, _ = _one(HostWork(multi_step=4), (0.0, 10, 9), (step_time_of(prefill=10) + 1e-3, 10, 2))
    round_end = step_time_of(prefill=10) + 4 * step_time_of(decodes=1)
    prefill_of_second = next(r for r in steps if r["prefills"] and r["start_s"] > 0)
    assert prefill_of_second["start_s"] == pytest.approx(round_end)
    plain, _, _ = _one(HostWork(), (0.0, 10, 9), (step_time_of(prefill=10) + 1e-3, 10, 2))
    assert late[1].first_token_s > plain[1].first_token_s  # multi-step delays the first token


def test_the_watermark_keeps_blocks_free_at_admission_and_the_front_end_delays_every_request():

    # two requests of 2 blocks each (20-token prompts, 16-token blocks) on 5 blocks: both fit, but
    # a watermark of 2 blocks holds the second back until the first has finished and freed its own
    specs = [(0.0, 20, 5), (0.0, 20, 5)]
    free, _, _ = _one(HostWork(), *specs, limits=Limits(kv_blocks=5, block_tokens=16))
    held, _, _ = _one(HostWork(), *specs, limits=Limits(kv_blocks=5, block_tokens=16, watermark_blocks=2))
    assert free[1].first_token_s == free[0].first_token_s
    assert held[1].first_token_s > held[0].end_s - 1e-12
    front, _, _ = _one(HostWork(frontend_s=5e-3), (0.0, 10, 3))
    none, _, _ = _one(HostWork(), (0.0, 10, 3))
    assert front[0].first_token_s == pytest.approx(none[0].first_token_s + 5e-3)


def test_a_prefix_cache_that_fills_evicts_the_least_recently_used_and_every_request_finishes():
    """Twelve prefixes of 64 tokens (4 blocks each) on a cache of 20 blocks: kept for the whole run they
    would leave no block for the sixth; evicted once unused, least recently used first, every request is
    served, and a prefix used again soon after is still cached."""
    specs = [(i * 1.0, 80, 2, f"p{i}", 64) for i in range(12)] + [(12.0, 80, 2, "p11", 64), (13.0, 80, 2, "p0", 64)]
    seqs, steps, _ = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=20, block_tokens=16, prefix_caching=True),
                           step_time)
    assert all(s.generated == s.output and s.end_s is not None for s in seqs)
    assert max(r["kv_blocks_used"] for r in steps) <= 20
    ttft = [s.first_token_s - s.arrival_s for s in seqs]
    assert ttft[12] < 0.5 * ttft[11]  # p11 was just used: its 64 tokens are cached
    assert ttft[13] == pytest.approx(ttft[0])  # p0 was evicted long ago: computed again


def test_a_prefix_id_reused_with_a_shorter_prefix_shares_only_its_own_prefix():
    """A request whose prefix under the same id is 32 tokens shares 2 cached blocks, not the 62 blocks a
    1000-token prefix left: it computes everything after its own 32 tokens."""
    specs = [(0.0, 1100, 2, "sys", 1000), (1.0, 1100, 2, "sys", 32)]
    seqs, _, _ = serve(reqs(*specs), "prefill_first", Limits(kv_blocks=1000, prefix_caching=True), step_time)
    assert seqs[1].first_token_s - seqs[1].arrival_s == pytest.approx(step_time_of(prefill=1100 - 32))


def test_a_request_that_only_fits_under_the_watermark_is_refused_before_the_run():
    with pytest.raises(ConfigError, match=r"request 0 needs 5 KV blocks .* admits") as info:
        serve(reqs((0.0, 64, 10)), "prefill_first", Limits(kv_blocks=5, block_tokens=16, watermark_blocks=1),
              step_time)
    assert info.value.field == "requests[0]"


def test_the_loop_keeps_integer_picoseconds_so_ten_steps_of_a_tenth_end_at_one_second():
    """In float seconds ten steps of 0.1 s end at 0.9999999999999999 s, before a request arriving at 1 s;
    on the integer clock they end at exactly 1 s, together with that arrival."""
    seqs, steps, _ = serve(reqs((0.0, 10, 10), (1.0, 10, 2)), "prefill_first", Limits(kv_blocks=100),
                           lambda batch: 0.1)
    assert all(isinstance(t, int) for s in seqs for t in (s.arrival_ps, s.scheduled_ps, s.first_token_ps, s.end_ps))
    assert seqs[0].end_ps == 10**12 == seqs[1].arrival_ps
    assert steps[9]["end_s"] == 1.0 and steps[10]["start_s"] == 1.0


def test_each_output_token_keeps_its_gap_from_the_one_before():
    seqs, _, _ = serve(reqs((0.0, 100, 5), (0.0, 100, 3)), "prefill_first", Limits(kv_blocks=100), step_time)
    first, second = seqs
    assert len(first.gaps) == 4 and len(second.gaps) == 2  # the first token has no gap before it
    assert sum(first.gaps) == first.end_ps - first.first_token_ps
    assert first.gaps[0] == pytest.approx(step_time_of(decodes=2) * 1e12, abs=1)  # both decode together
    assert first.gaps[-1] == pytest.approx(step_time_of(decodes=1) * 1e12, abs=1)  # alone, once the other ends
    assert first.row()["itl_s_max"] == pytest.approx(step_time_of(decodes=2))


def test_a_preemption_shows_as_one_long_gap():
    # 4 blocks of 16 tokens: the newer sequence is preempted and its context recomputed
    seqs, _, _ = serve(reqs((0.0, 20, 40), (0.0, 20, 40)), "prefill_first", Limits(kv_blocks=4), step_time)
    stalled = max(seqs, key=lambda s: s.preemptions)
    assert stalled.preemptions >= 1
    assert max(stalled.gaps) > 2 * sorted(stalled.gaps)[len(stalled.gaps) // 2]  # a stall, not a step


def test_closed_loop_clients_start_when_told_and_think_per_request():
    specs = [(0.0, 50, 10)] * 6
    thinks = [0.0, 0.0, 0.1, 0.2, 0.3, 0.4]
    seqs, _, _ = serve_instances(reqs(*specs), [Instance(scheduler="prefill_first", limits=Limits(kv_blocks=1000),
                                                         step_time=step_time)],
                                 users=2, think_s=thinks, starts_s=[0.0, 0.25])
    assert seqs[0].arrival_s == 0.0 and seqs[1].arrival_s == pytest.approx(0.25)
    for k in range(2, 6):  # the think time before request k, after its client's last one
        assert seqs[k].arrival_s == pytest.approx(seqs[k - 2].end_s + thinks[k])
    with pytest.raises(ConfigError, match="5 think times for 6 requests"):
        serve(reqs(*specs), "prefill_first", Limits(kv_blocks=1000), step_time, users=2, think_s=thinks[:5])
