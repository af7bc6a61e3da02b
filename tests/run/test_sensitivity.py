"""The estimates a run rests on, and its step time and energy at the ends of their ranges."""
from __future__ import annotations

import dataclasses

import pytest

import memsim
from memsim.report.summary_records import ABSENT
from memsim.run import sensitivity
from memsim.run.api import estimates
from tests.conftest import TINY_CHIP, warned

CHIP = (TINY_CHIP
        .replace("latency: 200 ns", "latency: {estimate: 200 ns, range: [100 ns, 600 ns]}")
        .replace("  op_overhead: 1 us", "  op_overhead: {estimate: 1 us, range: [0.5 us, 4 us]}")
        .replace("{name: pcie, bandwidth: 16 GB/s, latency: 1 us}",
                 "{name: pcie, bandwidth: 16 GB/s, latency: {estimate: 1 us, range: [0.5 us, 2 us]}}")
        .replace("channels: 2, efficiency: 0.9}",
                 "channels: 2, efficiency: 0.9, energy: {estimate: 7 pJ/bit, range: [4 pJ/bit, 10 pJ/bit]}}")
        + "system:\n  step_latency: {estimate: 1 us, range: [0.2 us, 3 us]}\n"
        + "power:\n  tdp: 100 W\n  static: 10 W\n")


@pytest.fixture()
def chip_path(tmp_path):
    path = tmp_path / "estimated.yaml"
    path.write_text(CHIP)
    return str(path)


def _run(chip_path, model, **kw):
    return memsim.simulate(chip_path, model, phase="decode", context=32, **kw)


def test_a_run_names_only_the_estimates_its_result_can_depend_on(chip_path, tiny_model_path):
    s = _run(chip_path, str(tiny_model_path)).summary.estimates
    assert s.count == 5
    # The PCIe link moved nothing and the system has one chip: their figures cannot matter.
    assert set(s.used) == {"levels[hbm].latency", "execution.op_overhead", "levels[hbm].energy"}
    assert s.sensitive == ()  # reruns only when asked


def test_a_link_is_known_used_by_its_typed_identity_not_by_parsing_output_names(tmp_path, tiny_model_path):
    """Weights that outgrow HBM stream from host memory over PCIe: its latency now matters. The
    run says so from the engine's accounts (``Result.moved``), not from summary.json's names."""
    host = "  - {name: ddr, kind: ddr, capacity: 1 GB, bandwidth: 20 GB/s, latency: 1 us, via: pcie}\nlinks:"
    chip_path = tmp_path / "host.yaml"
    chip_path.write_text(CHIP.replace("links:", host, 1))
    chip_path = str(chip_path)
    with warned():
        r = _run(chip_path, str(tiny_model_path), set={"hbm.capacity": "64 KiB"})
    from memsim.hardware.resource import Ref
    assert Ref.link("pcie") in r.moved and Ref.level("hbm") in r.moved
    assert "links[pcie].latency" in r.summary.estimates.used
    assert "links[pcie].latency" not in _run(chip_path, str(tiny_model_path)).summary.estimates.used
    found = {e.path: e.owner for e in estimates(chip_path)}
    assert found["links[pcie].latency"] == Ref.link("pcie") and found["execution.op_overhead"] is None


def test_the_ends_of_a_range_are_the_runs_with_those_values(chip_path, tiny_model_path):
    base = _run(chip_path, str(tiny_model_path), sensitivity=3).summary
    rows = {r.field: r for r in base.estimates.sensitive}
    over = rows["execution.op_overhead"]
    for end, value in zip(over.step_time_s, ("0.5 us", "4 us")):
        alone = _run(chip_path, str(tiny_model_path), set={"execution.op_overhead": value}).summary
        assert end == pytest.approx(alone.step_time_s, rel=1e-12)
    assert over.step_time_s[0] < base.step_time_s < over.step_time_s[1]
    swings = [r.step_swing for r in base.estimates.sensitive]
    assert swings == sorted(swings, reverse=True)


def test_energy_at_the_ends_follows_without_a_rerun_where_time_cannot_change(chip_path, tiny_model_path):
    base = _run(chip_path, str(tiny_model_path), sensitivity=3).summary
    row = next(r for r in base.estimates.sensitive if r.field == "levels[hbm].energy")
    assert row.step_time_s == (base.step_time_s,) * 2
    for end, value in zip(row.energy_j, ("4 pJ/bit", "10 pJ/bit")):
        alone = _run(chip_path, str(tiny_model_path), set={"hbm.energy": value}).summary
        assert alone.step_time_s == base.step_time_s
        assert end == pytest.approx(alone.energy_j.total, rel=1e-9)


def test_an_energy_that_could_reach_the_cap_is_rerun(chip_path, tiny_model_path):
    e = next(e for e in estimates(chip_path) if e.path == "levels[hbm].energy")
    run = _run(chip_path, str(tiny_model_path), sensitivity=0).summary
    summary = dataclasses.replace(run, chips=1, power_cap_w=100.0, peak_power_w=80.0)
    assert sensitivity.affects_time(e, summary)  # 80 W x 10/7 > 100 W
    assert not sensitivity.affects_time(e, dataclasses.replace(summary, peak_power_w=60.0))  # 60 W x 10/7 < 100 W
    assert not sensitivity.affects_time(e, dataclasses.replace(summary, power_cap_w=None))


def test_the_console_names_the_sensitive_estimates(chip_path, tiny_model_path):
    s = _run(chip_path, str(tiny_model_path), sensitivity=1).summary
    text = "\n".join(sensitivity.lines(s.estimates))
    assert "rests on 3 estimated preset values (of 5)" in text
    assert s.estimates.sensitive[0].field in text


CLOCKED = (CHIP + "  max_clock: 1 GHz\n"
           "  ridge_clock: {estimate: 700 MHz, range: [550 MHz, 850 MHz]}\n"
           "  floor_voltage: {estimate: 0.65, range: [0.55, 0.8]}\n"
           "  window: {estimate: 25 ms, range: [1 ms, 1 s]}\n")
SHAPE = ("power.ridge_clock", "power.floor_voltage")


@pytest.fixture()
def clocked_path(tmp_path):
    path = tmp_path / "clocked.yaml"
    path.write_text(CLOCKED)
    return str(path)


def test_the_clock_curve_and_the_window_matter_only_where_the_cap_can_bind(clocked_path, tiny_model_path):
    base = _run(clocked_path, str(tiny_model_path)).summary
    assert base.clock == 1 and not set(base.estimates.used) & {*SHAPE, "power.window"}
    for path, end in (("power.ridge_clock", "550 MHz"), ("power.floor_voltage", "0.55"), ("power.window", "1 ms")):
        alone = _run(clocked_path, str(tiny_model_path), set={path: end}).summary  # what a rerun would give
        assert (alone.step_time_s, alone.energy_j.total) == (base.step_time_s, base.energy_j.total)
    capped = _run(clocked_path, str(tiny_model_path), set={"execution.power_cap": "10.25 W"}).summary
    assert capped.clock < 1 and set(SHAPE) | {"power.window"} <= set(capped.estimates.used)


def test_an_end_of_a_range_at_the_value_is_the_run_itself(clocked_path, tiny_model_path):
    s = _run(clocked_path, str(tiny_model_path)).summary
    at_low = next(e for e in estimates(clocked_path) if e.path == "execution.op_overhead")
    at_low = dataclasses.replace(at_low, low=at_low.value, written=(at_low.written[0], at_low.written[0],
                                                                     at_low.written[2]))
    asked = []

    def rerun(path, value):
        asked.append(value)
        summary = _run(clocked_path, str(tiny_model_path), set={path: value}).summary
        return summary.step_time_s, summary.energy_j.total

    row = sensitivity.report(s, (at_low,), None, 1, rerun).sensitive[0]
    assert asked == [at_low.written[2]] and row.step_time_s[0] == s.step_time_s


def test_left_to_derive_a_small_run_is_rerun_and_a_large_one_is_not(chip_path, tiny_model_path, monkeypatch):
    """``sensitivity=None`` (the console's default): reruns where the run's engine events and
    records are at most ``AUTO_WORK``, and says so where they are not."""
    small = _run(chip_path, str(tiny_model_path), sensitivity=None).summary
    assert sensitivity.work(small) <= sensitivity.AUTO_WORK
    assert len(small.estimates.sensitive) == sensitivity.AUTO_TOP and small.estimates.not_rerun is ABSENT
    monkeypatch.setattr(sensitivity, "AUTO_WORK", sensitivity.work(small) - 1)
    large = _run(chip_path, str(tiny_model_path), sensitivity=None).summary.estimates
    assert large.sensitive == () and large.not_rerun == sensitivity.work(small)
    text = "\n".join(sensitivity.lines(large))
    assert f"took {sensitivity.work(small):,} engine events" in text and "--sensitivity N reruns it" in text
    asked = _run(chip_path, str(tiny_model_path), sensitivity=2).summary.estimates  # asked: rerun whatever the size
    assert len(asked.sensitive) == 2


def test_the_work_of_a_multi_chip_run_counts_its_collectives_distinct_transfers():
    """A wide all-reduce costs the mapping and the engine its transfers, worked out once per
    distinct round: they count towards the work that decides the default reruns."""
    from memsim import simulate
    r = simulate("h100-sxm", "gpt2", context=64, tp=4, sensitivity=0)
    distinct = {id(x): x for t in r.plan.tasks for x in t.rounds}
    counts = r.summary.engine
    assert counts.transfers == sum(map(len, distinct.values())) > 4 * 3
    assert sensitivity.work(r.summary) == counts.events + counts.records + counts.transfers
    assert simulate("h100-sxm", "gpt2", context=64, sensitivity=0).summary.engine.transfers == 0


def test_the_band_of_the_estimates_is_named_when_wider_than_a_tenth_of_the_step():
    """sn40l's HBM efficiency is an estimate (0.65 to 0.92): its 8B decode's step time moves by a third
    across that range, and the console names the band; h100-sxm's Llama-2-7B decode rests on
    estimates that move it 2%, and the console says nothing of a band."""
    from memsim import simulate
    from memsim.run import table as console_table

    wide = simulate("sn40l", "llama-3.1-8b", context=1024, sensitivity=3).summary
    low, high = wide.estimates.band_s
    ends = [t for row in wide.estimates.sensitive for t in row.step_time_s]
    assert low == min([*ends, wide.step_time_s]) and high >= max(ends)
    assert high - low > 0.1 * wide.step_time_s
    assert "rests on estimates" in console_table.table(wide)
    narrow = simulate("h100-sxm", "llama-2-7b", context=2048, sensitivity=3).summary
    low, high = narrow.estimates.band_s
    assert 0 < high - low < 0.1 * narrow.step_time_s
    assert "rests on estimates" not in console_table.table(narrow)


def test_a_step_rules_out_the_window_and_an_unreached_level_from_its_own_records():
    """The quick start's chip: h100-sxm's host DDR holds nothing (placement filled HBM first) and its
    limiter's window cannot matter (the chip's highest mean power over a window at either end of the
    range is under its cap): both are left out, and runs at the ends of their ranges are the run itself."""
    kw = dict(hw="h100-sxm", model="gpt2", context=256)
    base = memsim.simulate(**kw)
    found = {e.path: e for e in estimates("h100-sxm")}
    left_out = ("levels[ddr].capacity", "power.window")
    assert set(left_out) <= set(found) and not set(left_out) & set(base.summary.estimates.used)
    known = sensitivity.known_of(base.plan, base.engine, base.moved)
    assert sensitivity.affects_time(found["levels[ddr].capacity"], base.summary, base.moved)  # by its summary alone
    assert "ddr" in {ref.name for ref in known.unreached} and "hbm" not in {ref.name for ref in known.unreached}
    for path in left_out:
        e = found[path]
        assert not sensitivity.affects_time(e, base.summary, base.moved, known)
        for end in e.written[1:]:
            at = memsim.simulate(**kw, set={e.set_path: end}).summary
            assert (at.step_time_s, at.energy_j.total) == (base.summary.step_time_s, base.summary.energy_j.total)


def test_the_window_is_kept_where_a_chip_can_exceed_its_cap_over_its_shortest_end():
    base = memsim.simulate("h100-sxm", "gpt2", context=256)
    window = next(e for e in estimates("h100-sxm") if e.path == "power.window")
    known = sensitivity.known_of(base.plan, base.engine, base.moved)
    low = dataclasses.replace(base.summary, power_cap_w=known.window_power_w(int(window.low)) - 1)
    assert sensitivity.affects_time(window, low, base.moved, known)
    high = dataclasses.replace(base.summary, power_cap_w=known.window_power_w(int(window.low)) + 1)
    assert not sensitivity.affects_time(window, high, base.moved, known)


def test_a_generation_rules_nothing_out_from_its_prefills_records():
    run = memsim.simulate("h100-sxm", "gpt2", phase="generate", prompt=16, generate=4)
    plain = memsim.simulate("h100-sxm", "gpt2", context=256)
    assert "levels[ddr].capacity" in run.summary.estimates.used
    assert "levels[ddr].capacity" not in plain.summary.estimates.used
