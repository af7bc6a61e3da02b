"""The Python API: what a caller passes that is not what it takes is a memsim error, one line."""
from __future__ import annotations

import pytest

import memsim
from memsim import api


@pytest.mark.parametrize("call,field,needle", [
    (lambda: memsim.simulate("h100-sxm", "gpt2", context=8, set=5), "--set", "got 5"),
    (lambda: memsim.simulate("h100-sxm", "gpt2", context=8, set=[5]), "--set", "got 5"),
    (lambda: api.simulate_graph("h100-sxm", None), "graph", "got None"),
    (lambda: api.simulate_graph("h100-sxm", "gpt2"), "graph", "got 'gpt2'"),
    (lambda: api.run("gpt2"), "spec", "got 'gpt2'"),
])
def test_a_wrong_argument_is_a_memsim_error_naming_it(call, field, needle):
    """Issue 20: these raised TypeError or AttributeError from inside memsim."""
    with pytest.raises(memsim.ConfigError) as info:
        call()
    assert info.value.field == field and needle in str(info.value) and "\n" not in str(info.value)


def test_no_overrides_is_none_as_well_as_empty():
    none = memsim.simulate("h100-sxm", "gpt2", context=8, set=None).summary["step_time_s"]
    assert none == memsim.simulate("h100-sxm", "gpt2", context=8, set={}).summary["step_time_s"]
