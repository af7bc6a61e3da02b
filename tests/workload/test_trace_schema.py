"""The trace schema is declared once: the writer writes its keys, the reader checks them, and
docs/trace-schema.md is generated from it."""
from __future__ import annotations

from pathlib import Path

import pytest

from memsim.core.errors import TraceError
from memsim.workload import read_trace
from memsim.workload.trace import to_json
from memsim.workload.trace_schema import FIELDS, reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "trace-schema.md"


def test_the_page_is_current():
    assert PAGE.read_text() == reference(), "python scripts/reference.py --write"


def test_the_writer_writes_the_declared_keys_and_the_reader_refuses_others(tiny_graph, tmp_path):
    data = to_json(tiny_graph)
    assert list(data) == list(FIELDS[""])
    assert list(data["tensors"][0]) == list(FIELDS["tensor"])
    assert list(data["ops"][0]) == list(FIELDS["op"])
    assert list(data["ops"][0]["inputs"][0]) == list(FIELDS["input"])
    import json

    data["ops"][0]["colour"] = "red"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError, match="unknown field"):
        read_trace(path)
