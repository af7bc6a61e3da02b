"""``--chips N`` alone: the fastest tp x pp grid of N chips that fits, found with rooflines as bounds."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from memsim import CapacityError, ConfigError, simulate
from memsim.cli.main import main
from memsim.report.summary_records import ABSENT
from memsim.run.grid import candidates


def test_candidates_are_every_split_of_the_chips():
    assert candidates(12) == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]


def test_the_chosen_grid_is_the_fastest_that_fits():
    """Against simulating every grid: the search picks the fastest, and each grid it did not
    simulate has a roofline no less than the time it found."""
    options = dict(context=256, weight_dtype="int8")
    r = simulate("groq-lpu", "llama-3.2-1b", chips=16, **options)
    s = r.summary
    times = {}
    for tp, pp in candidates(16):
        try:
            times[(tp, pp)] = simulate("groq-lpu", "llama-3.2-1b", tp=tp, pp=pp, **options).summary.step_time_s
        except (CapacityError, ConfigError):
            continue
    best = min(times, key=times.__getitem__)
    assert (s.grid.tp, s.grid.pp) == best
    assert s.step_time_s == pytest.approx(times[best])
    for entry in s.grid_search:
        if entry.roofline_s is not ABSENT and entry.simulated_s is ABSENT:
            assert entry.roofline_s >= s.step_time_s
    assert sum(e.simulated_s is not ABSENT for e in s.grid_search) < len(times)  # the bound saved simulations


def test_no_grid_that_fits_is_one_line():
    result = CliRunner().invoke(main, ["run", "--hw", "groq-lpu", "--model", "llama-2-70b", "--chips", "8"],
                                standalone_mode=False)
    assert isinstance(result.exception, CapacityError) and result.exception.one_line(flags=True).startswith("--chips: ")
    assert "\n" not in result.exception.one_line()


def test_the_cli_prints_the_chosen_grid():
    result = CliRunner().invoke(main, ["run", "--hw", "h100-sxm", "--model", "llama-3.2-1b", "--context", "64",
                                       "--chips", "2"])
    assert result.exit_code == 0, result.output
    assert "chips            2 (tp " in result.output and "grid             chosen" in result.output


def test_chips_with_a_grid_that_does_not_match_is_an_error():
    with pytest.raises(ConfigError, match="tp x pp"):
        simulate("h100-sxm", "llama-3.2-1b", tp=2, chips=8)
