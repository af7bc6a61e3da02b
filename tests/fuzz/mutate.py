"""Hypothesis strategies that mutate a valid document: its parsed tree, its text and its bytes.

A mutation returns the new value and a short description, so that a failing case says what was
done to the seed (``set levels[2].bandwidth = '-1 TB/s'``). Nothing here knows memsim: the
per-input knowledge (seeds, field names, commands) lives in ``inputs.py`` and ``vocab.py``. The
helpers on parsed trees (paths, leaves, get, put) are the ones every kind uses.
"""
from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import yaml
from hypothesis import strategies as st

NUMBERS = ["0", "-1", "1", "3.35", "1e400", "-1e400", "nan", "inf", "-inf", "1e-400", "0x10", "1_000", "",
           "1e3", ".5", "-0", "99999999999999999999999", "1e308", "2.5e-7", "1e99999", "١٢"]
UNITS = ["B", "KB", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "Gb", "TB/s", "GB/s", "Gb/s", "MiB/s",
         "ps", "ns", "us", "µs", "ms", "s", "TFLOP/s", "GFLOP/s", "TOPS", "PFLOP/s", "", "XB", "TB/ms", "tb/s",
         "B/s/s", "%", "flops", "Hz", "TB/s TB/s"]
SPECIAL = [None, True, False, 0, -1, 1, -0.0, 0.5, 1.5, 2 ** 31, 2 ** 63, 2 ** 64, -2 ** 63, 10 ** 30, 10 ** 400,
           math.nan, math.inf, -math.inf, 1e-300, 5e-324, "", " ", "abc", "0", "-1", "1e400", "nan", "é", "\x00",
           "\ud800", [], {}, [1], {"a": 1}, "a" * 3000, [[[[[[[[[[[]]]]]]]]]]]]
TYPED_INTS = (0, -1, 1, 2, 3, 7, 2 ** 31, 2 ** 63, -2 ** 63, 10 ** 30, 10 ** 400, 2 ** 53 + 1)
TYPED_FLOATS = (0.0, -1.0, math.nan, math.inf, -math.inf, 1e-300, 1e300, 2.0, 1.0000001)
# Tokens that replace a number in JSON text, and a scalar in YAML text.
JSON_TOKENS = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1e-400", "9" * 5000, "01", "-0", "1.0", "2e0",
               "0.0", "-1", "18446744073709551616", "true", "null", '"1"', "[]", "{}"]
YAML_TOKENS = [".nan", ".inf", "-.inf", "1e400", "0x1F", "0o17", "1_000", "9" * 5000, "+1", "0b101", "1:30", "~",
               "!!str 5", "&r [*r]", "!!binary aGk=", "2024-01-01", "2024-01-01 10:00:00", "!!set {a: null}",
               "!!float nan", "!!python/object:os.system", "!!python/tuple [1, 2]", "yes", "no", "on", "'1'",
               "[1, 2", "{a: 1", '"\\x00"', '"\\ud800"', '"\\U0010FFFF"', "*undefined", "&a 5", "|\n  block",
               "!!int 12", "!!timestamp 2001-12-14", "=", "{<<: {a: 1}}", "[*a]", "!!map []", "'''"]
INSERTS = [b"\xff", b"\xfe\xff", b"\x80\x81", b"\x00", b"\t", b"\r", b"\xef\xbb\xbf", b"{", b"]", b": ", b"&a ",
           b"*a ", b"---\n", b"%YAML 1.1\n", b"\xe9", b"\n  - ", b"#", b"'", b'"', b"\\", b"\xed\xa0\x80"]
KEY_VARIANTS = ("upper", "plural", "chop", "space", "underscore", "other")


def describe(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into the tree, the root (``()``) first."""
    found = [prefix]
    if isinstance(tree, dict):
        for k, v in tree.items():
            found += paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            found += paths(v, (*prefix, i))
    return found


def get(tree: Any, path: tuple) -> Any:
    for p in path:
        tree = tree[p]
    return tree


def put(tree: Any, path: tuple, value: Any) -> Any:
    """Set ``path`` to ``value`` in place; returns the (possibly new) root."""
    if not path:
        return value
    get(tree, path[:-1])[path[-1]] = value
    return tree


def replaced(tree: Any, path: tuple, value: Any) -> Any:
    """A copy of ``tree`` with ``path`` set to ``value``."""
    return put(copy.deepcopy(tree), path, value)


def leaves(tree: Any) -> list[tuple]:
    """The paths of a tree's scalar leaves."""
    return [p for p in paths(tree) if not isinstance(get(tree, p), (dict, list))]


def tree_keys(tree: Any) -> set:
    """Every key of every mapping in the tree."""
    return {p[-1] for p in paths(tree) if p and isinstance(get(tree, p[:-1]), dict)}


def scalars(tree: Any) -> list:
    """The distinct scalar values of a tree: a dictionary of plausible values for its mutations."""
    seen: dict[str, Any] = {}
    for p in paths(tree):
        v = get(tree, p)
        if not isinstance(v, (dict, list)):
            seen.setdefault(repr(v), v)
    return list(seen.values()) or [0]


def unit_strings() -> st.SearchStrategy[str]:
    return st.builds(lambda n, sep, u: f"{n}{sep}{u}", st.sampled_from(NUMBERS),
                     st.sampled_from(["", " ", "  ", "\t"]), st.sampled_from(UNITS))


def values(dictionary: list) -> st.SearchStrategy[Any]:
    # Copies: a drawn list or mapping goes into a tree that later mutations change in place, and a
    # shared one would then differ from case to case (Hypothesis calls that a flaky strategy).
    return st.one_of(st.sampled_from(SPECIAL), st.sampled_from(dictionary), unit_strings(), st.integers(),
                     st.floats(), st.text(max_size=12), st.booleans()).map(copy.deepcopy)


def _with_number(text: str, new: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", lambda m: new, text, count=1)


@st.composite
def tree_mutation(draw, tree: Any, dictionary: list, keys: list[str]) -> tuple[Any, str]:
    """One structural mutation of ``tree`` (mutated in place where it can be)."""
    every = paths(tree)
    op = draw(st.sampled_from(("typed", "typed", "typed", "set", "set", "delete", "retype", "scale", "unit",
                               "add_key", "rename_key", "copy", "swap", "empty", "append")))
    path = every[draw(st.integers(0, len(every) - 1))]
    here = describe(path)
    old = get(tree, path)
    if op == "typed":  # same type, nasty value: gets past the type checks to what lies behind them
        leaves = [p for p in every if not isinstance(get(tree, p), (dict, list))]
        if leaves:
            path = leaves[draw(st.integers(0, len(leaves) - 1))]
            old, here = get(tree, path), describe(path)
            same = [v for v in dictionary if type(v) is type(old)]
            if isinstance(old, bool):
                new = not old
            elif isinstance(old, int):
                new = draw(st.one_of(st.sampled_from(TYPED_INTS), st.sampled_from(same or [0])))
            elif isinstance(old, float):
                new = draw(st.one_of(st.sampled_from(TYPED_FLOATS), st.floats()))
            elif isinstance(old, str) and re.search(r"\d", old) and draw(st.booleans()):
                new = _with_number(old, draw(st.sampled_from(NUMBERS)))
            else:
                new = draw(st.sampled_from(same or [""]))
            return put(tree, path, new), f"set {here} = {new!r:.80}"
    if op == "delete" and path:
        parent = get(tree, path[:-1])
        del parent[path[-1]]
        return tree, f"delete {here}"
    if op == "retype":
        new = draw(st.sampled_from((lambda v: [v], lambda v: {"value": v}, str, json.dumps,
                                    lambda v: None)))(old)
        return put(tree, path, new), f"retype {here} = {new!r:.80}"
    if op == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
        f = draw(st.sampled_from((-1, 0, 1e-9, 1e9, 1e300, 10 ** 20, 0.5, "+1", "-1")))
        try:
            new = old + int(f) if isinstance(f, str) else old * f
        except OverflowError:  # a huge integer times a huge float: past float range
            new = float("inf")
        return put(tree, path, new), f"scale {here} = {new!r:.80}"
    if op in ("unit", "scale") and isinstance(old, str) and old:
        which = draw(st.sampled_from(("number", "unit", "both")))
        num = draw(st.sampled_from(NUMBERS))
        unit = draw(st.sampled_from(UNITS))
        if which == "number" and re.search(r"\d", old):
            new = _with_number(old, num)
        elif which == "unit" and re.match(r"\s*-?[\d.]+", old):
            new = re.match(r"\s*-?[\d.eE+-]+", old).group(0) + " " + unit
        else:
            new = f"{num} {unit}"
        return put(tree, path, new), f"unit {here} = {new!r:.80}"
    if op in ("add_key", "append", "rename_key"):
        dicts = [p for p in every if isinstance(get(tree, p), dict)]
        lists = [p for p in every if isinstance(get(tree, p), list) and get(tree, p)]
        if op == "append" and lists:
            where = lists[draw(st.integers(0, len(lists) - 1))]
            target = get(tree, where)
            item = copy.deepcopy(target[draw(st.integers(0, len(target) - 1))]) if draw(st.booleans()) \
                else draw(values(dictionary))
            target.append(item)
            return tree, f"append to {describe(where)}: {item!r:.80}"
        if op == "rename_key" and any(get(tree, p) for p in dicts):
            where = [p for p in dicts if get(tree, p)]
            where = where[draw(st.integers(0, len(where) - 1))]
            target = get(tree, where)
            key = draw(st.sampled_from(sorted(target, key=str)))
            how = draw(st.sampled_from(KEY_VARIANTS))
            s = str(key)
            new_key = {"upper": s.upper(), "plural": s + "s", "chop": s[:-1], "space": s + " ",
                       "underscore": "_" + s}.get(how) or draw(st.sampled_from(keys))
            target[new_key] = target.pop(key)
            return tree, f"rename {describe((*where, key))} -> {new_key!r}"
        if dicts:
            where = dicts[draw(st.integers(0, len(dicts) - 1))]
            key = draw(st.one_of(st.sampled_from(keys), st.text(max_size=8), st.integers(-2, 2)))
            value = draw(values(dictionary))
            get(tree, where)[key] = value
            return tree, f"add {describe((*where, key))} = {value!r:.80}"
    if op in ("copy", "swap") and len(every) > 1:
        other = every[draw(st.integers(0, len(every) - 1))]
        if other[:len(path)] != path and path[:len(other)] != other:
            a, b = copy.deepcopy(get(tree, other)), copy.deepcopy(old)
            tree = put(tree, path, a)
            if op == "swap":
                tree = put(tree, other, b)
            return tree, f"{op} {here} <- {describe(other)}"
    if op == "empty":
        new = type(old)() if isinstance(old, (dict, list)) else ""
        return put(tree, path, new), f"empty {here}"
    new = draw(values(dictionary))
    return put(tree, path, new), f"set {here} = {new!r:.80}"


def dump(tree: Any, fmt: str, style: int) -> str:
    """Serialise a mutated tree. YAML goes out block, flow or as JSON (also YAML)."""
    try:
        if fmt == "yaml" and style < 2:
            return yaml.safe_dump(tree, sort_keys=False, default_flow_style=bool(style), allow_unicode=True)
        return json.dumps(tree, indent=None if style == 1 else 1, allow_nan=True)
    except (ValueError, TypeError, yaml.YAMLError):
        return json.dumps(tree, default=repr, allow_nan=True)


@st.composite
def text_mutation(draw, data: bytes, fmt: str) -> tuple[bytes, str]:
    """One mutation of a serialised document's text or bytes."""
    op = draw(st.sampled_from(("truncate", "insert", "dup_line", "del_line", "token", "token", "tabs", "crlf",
                               "bom", "utf16", "flip")))
    n = len(data)
    at = draw(st.integers(0, max(n - 1, 0)))
    lines = data.split(b"\n")
    if op == "truncate":
        return data[:at], f"truncate at byte {at} of {n}"
    if op == "insert":
        blob = draw(st.sampled_from(INSERTS))
        return data[:at] + blob + data[at:], f"insert {blob!r} at byte {at}"
    if op in ("dup_line", "del_line") and lines:
        i = draw(st.integers(0, len(lines) - 1))
        new = [*lines[:i + 1], lines[i], *lines[i + 1:]] if op == "dup_line" else lines[:i] + lines[i + 1:]
        return b"\n".join(new), f"{op} {i + 1}: {lines[i][:60]!r}"
    if op == "token":
        text = data.decode("utf-8", "surrogateescape")
        pattern = r"-?\d+(\.\d+)?([eE][-+]?\d+)?" if fmt == "json" else r"(?<=: )[^\n#{}\[\],]+"
        spots = list(re.finditer(pattern, text))
        if spots:
            m = spots[draw(st.integers(0, len(spots) - 1))]
            token = draw(st.sampled_from(JSON_TOKENS if fmt == "json" else YAML_TOKENS))
            text = text[:m.start()] + token + text[m.end():]
            return text.encode("utf-8", "surrogateescape"), f"replace {m.group(0)!r:.40} at char {m.start()} " \
                                                           f"with {token!r:.40}"
    if op == "tabs":
        return data.replace(b"  ", b"\t"), "indent with tabs"
    if op == "crlf":
        return data.replace(b"\n", b"\r\n"), "CRLF line ends"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 BOM"
    if op == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16"), "encoded as UTF-16"
    if n:
        bit = draw(st.integers(0, 7))
        return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1:], f"flip bit {bit} of byte {at}"
    return data, "no-op"


# Whole-file replacements: the file is not a document of the expected shape at all.
DIRECTORY, MISSING = "<directory>", "<missing>"
SPECIAL_FILES: dict[str, bytes | str] = {
    "empty file": b"", "whitespace": b" \n\t\n", "comment only": b"# nothing\n", "null": b"null\n",
    "list": b"[]\n", "number": b"42\n", "string": b'"text"\n', "nested": b"[" * 5000 + b"]" * 5000,
    "deep mapping": b"{\"a\": " * 3000 + b"1" + b"}" * 3000, "big int": b"{\"a\": " + b"9" * 5000 + b"}",
    "NUL bytes": b"\x00" * 16, "non-UTF-8": b"\xff\xfe\xfa\x80abc\n", "two documents": b"a: 1\n---\nb: 2\n",
    "alias loop": b"a: &x [*x]\n", "directory": DIRECTORY, "missing": MISSING, "random bytes": b"",
}


@st.composite
def document(draw, tree: Any, fmt: str, keys: list[str], original: bytes | None = None,
             extra: tuple = ()) -> tuple[bytes | str, list]:
    """A mutated version of ``tree``: mostly structural mutations, then some of its text; now and
    then a special file. The first example Hypothesis draws is the seed itself."""
    if draw(st.integers(0, 31)) == 17:
        name = draw(st.sampled_from(sorted(SPECIAL_FILES)))
        if name == "random bytes":
            return draw(st.binary(max_size=64)), [name]
        return SPECIAL_FILES[name], [f"special file: {name}"]
    tree = copy.deepcopy(tree)
    dictionary = scalars(tree) + list(extra)
    recipe = []
    for _ in range(draw(st.sampled_from((0, 1, 1, 1, 2, 2, 3)))):
        tree, what = draw(tree_mutation(tree, dictionary, keys))
        recipe.append(what)
    style = draw(st.integers(0, 2))
    data = original if original is not None and not recipe else dump(tree, fmt, style).encode("utf-8",
                                                                                              "surrogatepass")
    for _ in range(draw(st.sampled_from((0, 0, 0, 0, 0, 0, 1, 2)))):
        data, what = draw(text_mutation(data, fmt))
        recipe.append(what)
    return data, recipe
