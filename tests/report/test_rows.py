"""A run's tables are written without pandas, byte for byte as pandas writes them, and a DataFrame is
made from the same rows when one is asked for."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memsim
from memsim.report.rows import Rows, joined

RUNS = [
    dict(hw="h100-sxm", model="gpt2", context=64),
    dict(hw="h100-sxm", model="llama-3.2-1b", context=128, tp=2),
    dict(hw="wse-3", model="gpt2", phase="prefill", prompt=32, microbatches=2),
    dict(hw="h100-sxm", model="gpt2", phase="generate", prompt=16, generate=4),
]


@pytest.mark.parametrize("kw", RUNS, ids=lambda kw: f"{kw['hw']}-{kw.get('phase', 'decode')}")
def test_a_runs_tables_are_written_as_pandas_writes_them(kw):
    result = memsim.simulate(**kw)
    for name in ("timeline", "ops"):
        rows = result.tables.rows(name)
        frame = result.tables.get(name)
        assert rows.csv() == frame.to_csv(index=False), name
        assert list(frame.columns) == list(rows.columns) and len(frame) == len(rows.rows) > 0


CELL = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                 st.floats(allow_nan=True, allow_infinity=True, width=64), st.text(max_size=4),
                 st.sampled_from([np.int64(3), np.float64(0.1), "a,b", 'say "x"', "two\nlines", "cr\rx", ""]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(CELL, min_size=1, max_size=6), min_size=1, max_size=5), st.integers(1, 5))
def test_any_column_of_cells_is_typed_and_written_as_pandas_does(columns, width):
    """Mixed columns included: whole numbers beside a missing cell become floats (3.0), flags beside
    numbers are text, and a cell holding a comma, a quote or a newline is quoted."""
    length = min(len(c) for c in columns)
    names = tuple(f"c{i}" for i in range(len(columns)))
    table = Rows(names, tuple(zip(*(c[:length] for c in columns))))
    assert table.csv() == table.frame().to_csv(index=False)


def test_known_mixed_columns():
    table = Rows(("whole", "gap", "mixed", "flag", "text"),
                 ((1, 1, 1, True, "a"), (2, None, 2.5, False, None), (3, 3, float("nan"), True, "c,d")))
    assert table.csv().splitlines() == ["whole,gap,mixed,flag,text", "1,1.0,1.0,True,a", "2,,2.5,False,",
                                        '3,3.0,,True,"c,d"']


def test_an_empty_table_is_written_as_pandas_writes_one():
    assert Rows((), ()).csv() == pd.DataFrame().to_csv(index=False)
    assert Rows(("a", "b"), ()).csv() == pd.DataFrame(columns=["a", "b"]).to_csv(index=False) == "a,b\n"


def test_steps_joined_one_after_another_shift_and_name_their_rows():
    first = Rows(("start_s", "end_s", "op", "bytes"), ((0.0, 1.0, "a", 3), (1.0, 2.0, "", 4)))
    second = Rows(("start_s", "end_s", "op", "bytes"), ((0.0, 0.5, "b", 5),))
    both = joined([(first, 0.0, ""), (second, 2.0, "draft1/")])
    assert both.rows == ((0.0, 1.0, "a", 3), (1.0, 2.0, "", 4), (2.0, 2.5, "draft1/b", 5))
    expected = pd.concat([first.frame(), second.frame().assign(start_s=lambda f: f.start_s + 2.0,
                                                               end_s=lambda f: f.end_s + 2.0,
                                                               op="draft1/b")]).reset_index(drop=True)
    assert both.csv() == expected.to_csv(index=False)
    assert math.isclose(both.frame().end_s.iloc[-1], 2.5)


def test_a_table_written_a_chunk_at_a_time_is_typed_by_all_its_rows(monkeypatch, tmp_path):
    """Whole numbers in the first chunk and a missing cell in the last make a float column throughout,
    as pandas types the whole column; the file holds what ``csv()`` gives."""
    from memsim.report import rows as rows_module

    monkeypatch.setattr(rows_module, "CHUNK", 2)
    table = Rows(("n", "x", "t"), ((1, 0.5, "a"), (2, 1.5, "b,c"), (3, float("nan"), None), (None, 2.0, "d"), (5, 1.0, "")))
    assert table.csv() == table.frame().to_csv(index=False)
    assert table.csv().splitlines()[1] == "1.0,0.5,a"
    with open(tmp_path / "t.csv", "w", encoding="utf-8") as fh:
        table.write_csv(fh)
    assert (tmp_path / "t.csv").read_text() == table.csv()
