"""Reading the files people give: UTF-8 text, strict YAML and JSON, errors naming the file."""
from __future__ import annotations

from pathlib import Path

import pytest

from memsim.core import files
from memsim.core.errors import ConfigError, MemsimError, TraceError
from memsim.core.files import load_json, load_yaml, read_text


def _error(fn, path, error=ConfigError) -> MemsimError:
    with pytest.raises(error) as info:
        fn(path, error)
    assert info.value.file == str(path) and "\n" not in str(info.value)
    return info.value


def test_a_folder_is_said_to_be_one(tmp_path):
    assert _error(read_text, tmp_path).message == "is a directory, not a file"
    assert _error(read_text, tmp_path / "absent.yaml").message == "file not found"


def test_text_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: x\ndescription: caf\u00e9\n".encode("latin-1"))
    assert _error(read_text, path).message == "not UTF-8 text (byte 0xe9 on line 2)"


def test_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: x\n")
    assert load_yaml(path) == {"name": "x"}


@pytest.mark.parametrize(("text", "field", "key"), [
    ("name: a\nname: b\n", "name", "'name'"),
    ("compute:\n  peak: {bf16: 1 TFLOP/s, bf16: 2 TFLOP/s}\n", "compute.peak.bf16", "'bf16'"),
    ("levels:\n  - name: hbm\n    bandwidth: 1 TB/s\n    bandwidth: 2 TB/s\n", "levels[hbm].bandwidth", "'bandwidth'"),
    ("levels:\n  - {kind: sram, kind: hbm}\n", "levels[0].kind", "'kind'"),
    ("set:\n  batch: [1]\n  batch: [2]\n", "set.batch", "'batch'"),
])
def test_a_yaml_key_given_twice_is_an_error_naming_it(tmp_path, text, field, key):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    err = _error(load_yaml, path)
    assert err.field == field and f"duplicate key {key}" in err.message


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nchip:\n  <<: *b\n  x: 3\n")
    assert load_yaml(path)["chip"] == {"x": 3, "y": 2}


@pytest.mark.parametrize("text", ["x: " + "1" * 5000 + "\n", "[" * 100_000, "a: [\n", "? [1, 2]\n: 3\n"])
def test_yaml_that_cannot_be_read_is_one_line(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert "invalid YAML" in _error(load_yaml, path).message


@pytest.mark.parametrize(("text", "needle"), [
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"a": NaN}', "NaN"),
    ('{"a": -Infinity}', "Infinity"),
    ('{"a": 1e400}', "past float range"),
    ('{"a": ' + "1" * 5000 + "}", "limit"),
    ("[" * 100_000, "recursion"),
    ('{"a": ', "line 1"),
])
def test_json_that_memsim_does_not_accept_is_one_line(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    err = _error(load_json, path, TraceError)
    assert needle in err.message


def test_the_sweep_file_is_read_strictly(tmp_path):
    from memsim.sweep.runner import read_sweep_file

    path = tmp_path / "sweep.yaml"
    path.write_text("model: gpt2\nset:\n  batch: [1, 2]\n  batch: [4]\n")
    with pytest.raises(ConfigError) as info:
        read_sweep_file(path)
    assert info.value.file == str(path) and info.value.field == "set.batch"
    path.write_text("model: gpt2\nset: {batch: [1, 2]}\n")
    assert read_sweep_file(path) == ({"model": "gpt2"}, {"batch": ["1", "2"]})


@pytest.mark.parametrize("load,name,text,field", [
    (load_json, "t.json", '{"ops": [{"name": "a\\ud800b"}]}', "ops[0].name"),
    (load_json, "t.json", '{"meta": {"\\udc00": 1}}', "meta.\\udc00"),  # printable: escaped
    (load_yaml, "h.yaml", 'description: "x\\ud800"\n', "description"),
    (load_yaml, "h.yaml", 'levels: [{name: "\\U0000dfff"}]\n', "levels[0].name"),
])
def test_a_lone_surrogate_is_refused_at_load_naming_its_field(tmp_path, load, name, text, field):
    """A UTF-16 surrogate written as an escape and not paired is not text: it is refused where the
    file is read, naming the field, rather than failing when the output is written (issue 20)."""
    path = tmp_path / name
    path.write_text(text)
    error = _error(load, path, TraceError if load is load_json else ConfigError)
    assert error.field == field and "surrogate" in error.message


def test_a_surrogate_pair_and_an_escaped_backslash_are_text(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}')
    assert load_json(path) == {"a": "\U0001f600", "b": "\\ud800"}


SHIPPED = sorted(Path(__file__).resolve().parents[2].glob("configs/**/*.y*ml"))


@pytest.mark.skipif(files._FastLoader is None, reason="PyYAML built without libyaml")
def test_the_fast_parser_reads_every_shipped_file_as_pyyamls_own_does(monkeypatch):
    assert len(SHIPPED) > 30
    fast = [load_yaml(path) for path in SHIPPED]
    monkeypatch.setattr(files, "_FastLoader", None)
    assert fast == [load_yaml(path) for path in SHIPPED]


@pytest.mark.parametrize("text", ["a: 1\na: 2\n", "a: [1, 2\n", 'd: "x\\ud800"\n', "a: !!python/object:os.system x\n",
                                  "- [a\n", "k: v\n- x\n"])
def test_a_refused_file_gets_the_error_pyyamls_own_parser_gives(monkeypatch, tmp_path, text):
    path = tmp_path / "h.yaml"
    path.write_text(text)
    fast = _error(load_yaml, path)
    monkeypatch.setattr(files, "_FastLoader", None)
    slow = _error(load_yaml, path)
    assert (fast.message, fast.field) == (slow.message, slow.field)
